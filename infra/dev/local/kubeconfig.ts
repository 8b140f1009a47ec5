/** A kubeconfig file for a local control plane: one cluster, one token user, one context. */
import { writeFileSync } from "node:fs";
import { stringify } from "yaml";

export function writeKubeconfig(path: string, opts: { name: string; server: string; token: string; caPem: string }): void {
  const doc = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: opts.name,
        cluster: { server: opts.server, "certificate-authority-data": Buffer.from(opts.caPem).toString("base64") },
      },
    ],
    users: [{ name: `${opts.name}-admin`, user: { token: opts.token } }],
    contexts: [{ name: opts.name, context: { cluster: opts.name, user: `${opts.name}-admin`, namespace: "default" } }],
    "current-context": opts.name,
  };
  writeFileSync(path, stringify(doc), { mode: 0o600 });
}
