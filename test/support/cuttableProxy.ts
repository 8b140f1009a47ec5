/**
 * A network partition between a client and an API server, for tests: a TCP proxy that can drop every
 * connection and refuse new ones, and a kubeconfig that goes through it.
 */
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";

/** The same credentials through another URL (the proxy's); the certificate is for 127.0.0.1 either way. */
export function proxiedKubeConfig(kubeConfig: KubeConfig, url: string): KubeConfig {
  const server = kubeConfig.getCurrentCluster()!.server;
  const kc = new KubeConfig();
  kc.loadFromString(kubeConfig.exportConfig().split(server).join(url));
  return kc;
}

/** A TCP proxy that can drop every connection and refuse new ones, like a network partition. */
export class CuttableProxy {
  private readonly sockets = new Set<Socket>();
  private open = true;
  private server!: Server;
  url = "";

  private constructor(private readonly target: URL) {}

  static async start(target: URL): Promise<CuttableProxy> {
    const proxy = new CuttableProxy(target);
    proxy.server = createServer((client) => proxy.accept(client));
    await new Promise<void>((resolve) => proxy.server.listen(0, "127.0.0.1", resolve));
    proxy.url = `https://127.0.0.1:${(proxy.server.address() as AddressInfo).port}`;
    return proxy;
  }

  private accept(client: Socket): void {
    if (!this.open) {
      client.destroy();
      return;
    }
    const upstream = connect(Number(this.target.port), this.target.hostname);
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
      socket.on("error", () => undefined);
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.pipe(upstream).pipe(client);
  }

  cut(): void {
    this.open = false;
    for (const socket of this.sockets) socket.destroy();
  }

  resume(): void {
    this.open = true;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
