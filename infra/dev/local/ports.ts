/**
 * Free TCP ports for local services (etcd, kube-apiserver, DynamoDB Local, ...).
 *
 * The OS picks a free port when we listen on port 0; we close the listener and hand the number out.
 * Between the close and the child's own bind another process could take it, so callers that start
 * several services at once (two control planes in one test run) would race each other: the set below
 * makes sure this process never hands out the same port twice.
 */
import { createServer } from "node:net";

const handedOut = new Set<number>();

export async function findFreePort(host = "127.0.0.1"): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await listenOnAnyPort(host);
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`findFreePort: no fresh free port on ${host} after 50 attempts`);
}

function listenOnAnyPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ port: 0, host, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === "string") {
        server.close();
        reject(new Error("findFreePort: listener has no TCP address"));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}
