/**
 * A real, local Kubernetes control plane without Docker: etcd + kube-apiserver (+ kwok as a fake
 * kubelet and a tiny binder as the scheduler), with this project's CRDs installed. Used by the
 * integration tests (two at once: source and destination) and by `npm start` when no cluster is given.
 *
 * Binaries come from infra/dev/controlplane/build.sh (~/.cache/dvm-controlplane/bin by default).
 * There is no controller-manager: no garbage collection by owner reference, no Job controller,
 * namespaces stay Terminating, no ServiceAccount tokens. CRD generation and /status do work.
 */
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { definedFields } from "../../../src/lib/definedFields";
import { startApiServer } from "./apiserver";
import { PodBinder } from "./binder";
import { localTools } from "./config";
import { installCrds, readCrds } from "./crds";
import { compactEtcd, startEtcd } from "./etcd";
import { writeKubeconfig } from "./kubeconfig";
import { ensureKwokNode, KWOK_NODE_NAME, startKwok } from "./kwok";
import { type ManagedProcess, removeNow, removeOnExit, startReaper, stopProcess } from "./processes";

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const DEFAULT_CRD_DIR = join(REPO_ROOT, "infra/deploy/crds");
export const DEFAULT_KWOK_STAGES = join(REPO_ROOT, "infra/dev/kwok/stages.yaml");
const BINARIES = ["etcd", "kube-apiserver", "kwok"] as const;

export interface ControlPlaneOptions {
  /** Names the temp dir and the kubeconfig context, e.g. "source". */
  name: string;
  /** Where etcd, kube-apiserver and kwok are; default $DVM_CONTROLPLANE_BIN or the build.sh cache. */
  binDir?: string;
  /** CRDs to install (every *.yaml); default infra/deploy/crds. Pass null to install none. */
  crdDir?: string | null;
  /** Start kwok, a fake node and the pod binder (default true). */
  withKwok?: boolean;
  /** kwok Stage config; default infra/dev/kwok/stages.yaml. */
  kwokStages?: string;
  /** Where child logs go (kept after stop); default a "logs" folder in the temp dir (removed on stop). */
  logDir?: string;
  /** Where the API server listens; default 127.0.0.1 (node mode: the fabric bridge, see infra/dev/local/nodes). */
  bindAddress?: string;
  /** The cluster's Service range; default 198.19.0.0/24. */
  serviceCidr?: string;
  /**
   * Pods get their ServiceAccount's token (the API server's ServiceAccount admission), as on a real
   * cluster. Only with real nodes, whose controller-manager creates each namespace's "default" account
   * and its kube-root-ca.crt (node mode: the relay Deployment runs in-cluster with its own account).
   */
  serviceAccounts?: boolean;
}

export interface ControlPlane {
  name: string;
  kubeconfigPath: string;
  /** API server URL, https://127.0.0.1:PORT. */
  server: string;
  /** etcd client URL (http), for compaction in tests. */
  etcdUrl: string;
  /** Name of the kwok node pods get bound to, when started withKwok. */
  nodeName: string | undefined;
  logDir: string;
  kubeConfig(): KubeConfig;
  /**
   * Compacts etcd to its current revision (returned): reads that reach etcd at an older
   * resourceVersion answer 410 Gone. Watches are served by the apiserver's watch cache, which keeps
   * its own history; to make a watch from an old resourceVersion answer 410, also restartApiServer()
   * (the cache starts again from the current revision, as after a real apiserver rollout).
   */
  compactEtcd(): Promise<number>;
  /** Restarts kube-apiserver in place (same URL, certificate, token, etcd); watches are cut. */
  restartApiServer(): Promise<void>;
  /** The child processes (name and pid), e.g. to check that stop() left none behind. */
  processes(): ReadonlyArray<{ name: string; pid: number }>;
  stop(): Promise<void>;
}

export function defaultBinDir(): string {
  return localTools().controlPlaneBin;
}

export async function startControlPlane(opts: ControlPlaneOptions): Promise<ControlPlane> {
  const binDir = opts.binDir ?? defaultBinDir();
  const missing = BINARIES.filter((b) => (b !== "kwok" || opts.withKwok !== false) && !existsSync(join(binDir, b)));
  if (missing.length > 0) {
    throw new Error(
      `local control plane: ${missing.join(", ")} not found in ${binDir}. Build them with ` +
        `infra/dev/controlplane/build.sh (needs Go), or set KUBECONFIG to an existing cluster (e.g. one made by kind).`,
    );
  }
  const workDir = mkdtempSync(join(tmpdir(), `dvm-cp-${opts.name}-`));
  removeOnExit(workDir);
  const logDir = opts.logDir ?? join(workDir, "logs");
  mkdirSync(logDir, { recursive: true });
  const pidFile = join(workDir, "pids");
  // Getters, because a restarted apiserver is a new process.
  const children: Array<() => ManagedProcess> = [];
  // Started first, so that even a SIGKILLed test run takes etcd and the apiserver down with it.
  const reaper = startReaper(opts.name, pidFile, [workDir], join(logDir, "reaper.log"));
  let binder: PodBinder | undefined;
  let stopped = false;

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await binder?.stop();
    // In reverse start order: kwok, then the apiserver (which stalls its shutdown retrying a gone
    // etcd if etcd goes first), then etcd.
    for (const child of [...children].reverse()) {
      await stopProcess(child(), 5_000);
    }
    await stopProcess(reaper, 1_000);
    removeNow(workDir);
  };

  try {
    const etcd = await startEtcd({ binDir, dataDir: join(workDir, "etcd"), logDir, pidFile });
    children.push(() => etcd.process);
    const api = await startApiServer({
      binDir,
      workDir,
      logDir,
      etcdUrl: etcd.url,
      pidFile,
      ...definedFields({ bindAddress: opts.bindAddress || undefined, serviceCidr: opts.serviceCidr || undefined }),
      ...(opts.serviceAccounts ? { serviceAccountAdmission: true } : {}),
    });
    children.push(() => api.process);

    const kubeconfigPath = join(workDir, "kubeconfig");
    writeKubeconfig(kubeconfigPath, { name: opts.name, server: api.server, token: api.token, caPem: api.caPem });
    const kubeConfig = (): KubeConfig => {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      return kc;
    };

    const crdDir = opts.crdDir === undefined ? DEFAULT_CRD_DIR : opts.crdDir;
    const crds = crdDir === null ? [] : readCrds(crdDir);
    if (crdDir !== null) await installCrds(kubeConfig(), crdDir);
    // What a restart waits for: the resources this project watches.
    const watchPaths = ["/api/v1/pods", ...crds.map((c) => `/apis/${c.spec.group}/${c.spec.versions[0]?.name}/${c.spec.names.plural}`)];

    let nodeName: string | undefined;
    if (opts.withKwok !== false) {
      const kwok = await startKwok({
        binDir,
        kubeconfigPath,
        stagesFile: opts.kwokStages ?? DEFAULT_KWOK_STAGES,
        workDir,
        logDir,
        pidFile,
      });
      children.push(() => kwok);
      await ensureKwokNode(kubeConfig(), kwok);
      nodeName = KWOK_NODE_NAME;
      binder = new PodBinder(kubeConfig(), nodeName, join(logDir, "binder.log"));
      binder.start();
    }

    return {
      name: opts.name,
      kubeconfigPath,
      server: api.server,
      etcdUrl: etcd.url,
      nodeName,
      logDir,
      kubeConfig,
      compactEtcd: () => compactEtcd(etcd.url),
      restartApiServer: () => api.restart(watchPaths),
      processes: () => [...children.map((c) => c()), reaper].map((c) => ({ name: c.name, pid: c.pid })),
      stop,
    };
  } catch (err) {
    await stop().catch(() => undefined);
    if (opts.logDir === undefined && err instanceof Error) {
      err.message += `\n(logs were in ${logDir}, now removed; pass logDir to keep them)`;
    }
    throw err;
  }
}
