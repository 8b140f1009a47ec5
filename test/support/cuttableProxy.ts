/**
 * A network partition between a client and an API server, for tests: a TCP proxy that can drop every
 * connection and refuse new ones, and a kubeconfig that goes through it. It can also make the server
 * answer slowly: a delay before some of the chunks it sends back (in order, per connection).
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

export interface AnswerDelay {
  /** Held back this long before it is passed on. */
  ms: number;
  /** Share of the server's chunks (about one per answer) that are held back. */
  fraction: number;
  /** In [0, 1); seeded by the caller for a reproducible run. */
  random: () => number;
}

/** A TCP proxy that can drop every connection and refuse new ones, like a network partition. */
export class CuttableProxy {
  private readonly sockets = new Set<Socket>();
  private open = true;
  private server!: Server;
  url = "";
  /** Chunks from the server held back so far. */
  delayedAnswers = 0;

  private constructor(
    private readonly target: URL,
    private readonly delay?: AnswerDelay,
  ) {}

  static async start(target: URL, options: { delay?: AnswerDelay } = {}): Promise<CuttableProxy> {
    const proxy = new CuttableProxy(target, options.delay);
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
    client.pipe(upstream);
    if (this.delay) this.pipeDelayed(upstream, client, this.delay);
    else {
      upstream.on("close", () => client.destroy());
      upstream.pipe(client);
    }
  }

  /** Like from.pipe(to), with some chunks held back; later chunks wait for them, so the order holds. */
  private pipeDelayed(from: Socket, to: Socket, delay: AnswerDelay): void {
    let queue: Promise<void> = Promise.resolve();
    from.on("data", (chunk: Buffer) => {
      const holdMs = delay.random() < delay.fraction ? delay.ms : 0;
      if (holdMs > 0) this.delayedAnswers++;
      queue = queue.then(async () => {
        if (holdMs > 0) await new Promise((resolve) => setTimeout(resolve, holdMs));
        if (!to.destroyed) to.write(chunk);
      });
    });
    from.on("end", () => {
      queue = queue.then(() => {
        to.end();
      });
    });
    // What was held back still arrives before the connection closes.
    from.on("close", () => {
      queue = queue.then(() => {
        to.destroy();
      });
    });
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
