/**
 * kube-apiserver for a local control plane, with the flags envtest uses (see the toolchain notes):
 * token authentication for one system:masters user (simplest credential a kubeconfig can carry),
 * RBAC, a self-signed serving certificate in a temp cert dir, service-account keys made here.
 * No controller-manager runs, so the ServiceAccount admission plugin is off: it would reject every pod
 * for want of a "default" ServiceAccount that nothing creates.
 */
import { generateKeyPair, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { promisify } from "node:util";
import { findFreePort } from "./ports";
import { type ManagedProcess, spawnLogged, stopProcess, tailFile } from "./processes";
import { GiveUp, waitFor } from "./wait";

export interface ApiServerHandle {
  server: string;
  token: string;
  /** PEM of the self-signed serving certificate's CA, for the kubeconfig. */
  caPem: string;
  /** The current process (a new one after restart). */
  readonly process: ManagedProcess;
  /**
   * Stops the apiserver and starts it again on the same port, certificate and etcd. Resolves when a
   * watch on each of `watchPaths` (e.g. "/api/v1/pods") is served: right after a start the watch
   * caches are still filling and answer 429.
   */
  restart(watchPaths?: string[]): Promise<void>;
}

export async function startApiServer(opts: {
  binDir: string;
  workDir: string;
  logDir: string;
  etcdUrl: string;
  pidFile: string;
  /** Where it listens (and what its certificate names); default 127.0.0.1. Node mode: the fabric bridge. */
  bindAddress?: string;
  /** Service addresses; default 198.19.0.0/24 (inside 198.18.0.0/15, like every local address). */
  serviceCidr?: string;
  /**
   * The ServiceAccount admission plugin: pods get their account's token mounted, as on any cluster.
   * Only where a controller-manager creates each namespace's "default" account (node mode); without
   * one, the plugin would refuse every pod of a new namespace.
   */
  serviceAccountAdmission?: boolean;
}): Promise<ApiServerHandle> {
  const bindAddress = opts.bindAddress ?? "127.0.0.1";
  const port = await findFreePort(bindAddress);
  const server = `https://${bindAddress}:${port}`;
  const certDir = join(opts.workDir, "certs");
  mkdirSync(certDir, { recursive: true });

  const token = randomBytes(24).toString("hex");
  const tokenFile = join(opts.workDir, "tokens.csv");
  writeFileSync(tokenFile, `${token},admin,admin-uid,"system:masters"\n`, { mode: 0o600 });

  // Service-account token signing keys: the apiserver refuses to start without them.
  const { publicKey, privateKey } = await promisify(generateKeyPair)("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs1", format: "pem" },
  });
  const saPub = join(opts.workDir, "sa.pub");
  const saKey = join(opts.workDir, "sa.key");
  writeFileSync(saPub, publicKey);
  writeFileSync(saKey, privateKey, { mode: 0o600 });

  const logFile = join(opts.logDir, "kube-apiserver.log");
  const args = [
    `--etcd-servers=${opts.etcdUrl}`,
    `--secure-port=${port}`,
    `--bind-address=${bindAddress}`,
    `--advertise-address=${bindAddress}`,
    `--cert-dir=${certDir}`,
    `--token-auth-file=${tokenFile}`,
    "--authorization-mode=RBAC",
    `--service-cluster-ip-range=${opts.serviceCidr ?? "198.19.0.0/24"}`,
    // kubectl logs and exec reach a real node's kubelet by its fabric address.
    "--kubelet-preferred-address-types=InternalIP",
    "--allow-privileged=true",
    ...(opts.serviceAccountAdmission ? [] : ["--disable-admission-plugins=ServiceAccount"]),
    `--service-account-issuer=${server}/`,
    `--service-account-key-file=${saPub}`,
    `--service-account-signing-key-file=${saKey}`,
    "--profiling=false",
    "--v=1",
  ];
  // Everything the apiserver needs is in files it finds again (port, cert dir, token, keys), so a
  // restart serves the same URL with the same certificate and the kubeconfig stays valid.
  const launch = async (): Promise<ManagedProcess> => {
    const proc = spawnLogged({
      name: "kube-apiserver",
      command: join(opts.binDir, "kube-apiserver"),
      args,
      logFile,
      pidFile: opts.pidFile,
    });
    await waitFor(
      "kube-apiserver /readyz",
      async () => {
        if (!proc.isRunning()) throw new GiveUp(`kube-apiserver exited early:\n${tailFile(logFile)}`);
        return (await httpsGetStatus(`${server}/readyz`, token)) === 200;
      },
      90_000,
      () => tailFile(logFile),
      200,
    );
    return proc;
  };
  let current = await launch();

  // apiserver.crt holds the serving certificate followed by the CA that signed it (for 127.0.0.1).
  const certs = readFileSync(join(certDir, "apiserver.crt"), "utf8").match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g);
  const caPem = certs?.at(-1);
  if (!caPem) throw new Error(`kube-apiserver: no certificate in ${certDir}/apiserver.crt`);
  return {
    server,
    token,
    caPem,
    get process() {
      return current;
    },
    restart: async (watchPaths = []) => {
      await stopProcess(current, 10_000);
      current = await launch();
      for (const path of watchPaths) {
        await waitFor(
          `a watch on ${path}`,
          async () => (await httpsGetStatus(`${server}${path}?watch=1&resourceVersion=0&timeoutSeconds=1`, token)) === 200,
          60_000,
          () => tailFile(logFile),
          200,
        );
      }
    },
  };
}

/** Status code of a GET, ignoring the certificate (we probe before we have read it). */
function httpsGetStatus(url: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${token}` }, rejectUnauthorized: false, timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}
