/**
 * The watch relay as the Deployment users run, on a node-mode cluster: `kubectl apply -k` of the overlay
 * that the kind end-to-end run applies too (infra/dev/kind/host, which is infra/deploy/k8s with the e2e
 * settings), wrapped in an overlay written to a temp folder that sets only what this machine decides at
 * run time: the locally built image and the phase function's name. The relay's AWS endpoint and the
 * destination's kubeconfig come in the two optional Secrets the Deployment reads, as on kind.
 *
 * Pods reach this machine only at the fabric bridge's address (SlotPlan.bridgeIp); InvokeRecorder
 * listens there, notes which pod sent each Invoke call and passes it on to serverless-offline.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { AppsV1Api, CoordinationV1Api, CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { isPhaseName, phaseSpec } from "../../../src/dvm/itinerary";
import { waitFor } from "./wait";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/** The overlay e2e.sh applies on kind: the one source of the relay's manifests for both runs. */
export const RELAY_OVERLAY = join(ROOT, "infra", "dev", "kind", "host");
const REMOTE_MANIFESTS = join(ROOT, "infra", "deploy", "k8s", "remote");
export const RELAY_SYSTEM_NAMESPACE = "dvm-system";
const DEPLOYMENT = "dvm-relay";

export interface Invocation {
  at: number;
  /** The calling pod's address. */
  from: string;
  functionName: string;
}

/** An HTTP pass-through to the Invoke API that records who called, and when (Date.now()). */
export class InvokeRecorder {
  readonly invocations: Invocation[] = [];
  private constructor(
    private readonly server: Server,
    readonly endpoint: string,
  ) {}

  static async start(listenHost: string, upstream: string): Promise<InvokeRecorder> {
    const target = new URL(upstream);
    let recorder: InvokeRecorder | undefined;
    const server = createServer((req, res) => {
      const match = /\/functions\/([^/]+)\/invocations/.exec(req.url ?? "");
      if (match?.[1]) recorder?.invocations.push({ at: Date.now(), from: req.socket.remoteAddress ?? "", functionName: decodeURIComponent(match[1]) });
      const forward = httpRequest(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.once("error", (error) => {
        res.writeHead(502).end(error.message);
      });
      req.pipe(forward);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host: listenHost, port: 0 }, resolve);
    });
    const { port } = server.address() as AddressInfo;
    recorder = new InvokeRecorder(server, `http://${listenHost}:${port}`);
    return recorder;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

export interface RelayDeploymentOptions {
  /** The source cluster: its admin kubeconfig file (kubectl) and client. */
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  /** The destination, whose pods the relay watches with the dvm-relay-pods identity. */
  destination: { kubeconfigPath: string; kubeConfig: KubeConfig };
  image: string;
  functionName: string;
  /** The Invoke API as the pods reach it (http://<bridge>:<port>). */
  lambdaEndpoint: string;
}

export interface RelayDeployment {
  /** The namespace whose DVMs the relay forwards (the overlay's RELAY_NAMESPACE). */
  dvmNamespace: string;
  leaseDurationMs: number;
  /** Waits for every replica of the Deployment to be Ready; resolves with their pods. */
  ready(timeoutMs?: number): Promise<V1Pod[]>;
  pods(): Promise<V1Pod[]>;
  /** The Lease's holder: the leading pod's name. */
  leader(): Promise<string | undefined>;
  forceDelete(pod: string): Promise<void>;
  logs(pod: string): Promise<string>;
  /** Deletes the Deployment (the RBAC and the namespace stay: other runs on the cluster share them). */
  remove(): Promise<void>;
}

const kubectl = (kubeconfig: string, ...args: string[]) =>
  run("kubectl", ["--kubeconfig", kubeconfig, ...args], { timeout: 120_000, maxBuffer: 16 << 20 }).catch((error: { stderr?: string; message: string }) => {
    throw new Error(`kubectl ${args.join(" ")}: ${error.stderr || error.message}`);
  });

/** The overlay around RELAY_OVERLAY that sets this run's image and function; returns its folder. */
export function writeRelayOverlay(image: string, functionName: string): string {
  const dir = mkdtempSync(join(tmpdir(), "dvm-relay-overlay-"));
  const colon = image.lastIndexOf(":");
  const overlay = {
    apiVersion: "kustomize.config.k8s.io/v1beta1",
    kind: "Kustomization",
    resources: [relative(dir, RELAY_OVERLAY)],
    images: [{ name: "dvm-relay", newName: image.slice(0, colon), newTag: image.slice(colon + 1) }],
    patches: [
      {
        target: { kind: "ConfigMap", name: "dvm-relay" },
        patch: JSON.stringify([{ op: "replace", path: "/data/RELAY_FUNCTION_NAME", value: functionName }]),
      },
    ],
  };
  writeFileSync(join(dir, "kustomization.yaml"), JSON.stringify(overlay, null, 2));
  return dir;
}

async function upsertSecret(kc: KubeConfig, name: string, stringData: Record<string, string>): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const body = { metadata: { name, namespace: RELAY_SYSTEM_NAMESPACE }, stringData };
  await core.createNamespacedSecret({ namespace: RELAY_SYSTEM_NAMESPACE, body }).catch(async (error: { code?: number }) => {
    if (error.code !== 409) throw error;
    await core.replaceNamespacedSecret({ namespace: RELAY_SYSTEM_NAMESPACE, name, body });
  });
}

/**
 * A kubeconfig for the destination with the dvm-relay-pods identity of infra/deploy/k8s/remote (applied
 * there first), its token minted with the TokenRequest API.
 */
async function destinationPodsKubeconfig(destination: RelayDeploymentOptions["destination"]): Promise<string> {
  await kubectl(destination.kubeconfigPath, "apply", "-k", REMOTE_MANIFESTS);
  const token = await destination.kubeConfig.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    namespace: RELAY_SYSTEM_NAMESPACE,
    name: "dvm-relay-pods",
    body: { spec: { audiences: [], expirationSeconds: 24 * 3600 } },
  });
  const admin = destination.kubeConfig.getCurrentCluster();
  if (!admin?.caData) throw new Error("the destination's kubeconfig has no certificate-authority-data");
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "destination", cluster: { server: admin.server, "certificate-authority-data": admin.caData } }],
    users: [{ name: "dvm-relay-pods", user: { token: token.status?.token } }],
    contexts: [{ name: "destination", context: { cluster: "destination", user: "dvm-relay-pods" } }],
    "current-context": "destination",
  });
}

/** Applies the relay's manifests and Secrets on the source; returns at once (see ready()). */
export async function deployRelay(options: RelayDeploymentOptions): Promise<RelayDeployment> {
  const overlay = writeRelayOverlay(options.image, options.functionName);
  try {
    return await applyRelay(options, overlay);
  } finally {
    rmSync(overlay, { recursive: true, force: true });
  }
}

async function applyRelay(options: RelayDeploymentOptions, overlay: string): Promise<RelayDeployment> {
  const rendered = parseAllDocuments((await kubectl(options.kubeconfigPath, "kustomize", overlay)).stdout).map((d) => d.toJSON() as Record<string, never>);
  const config = rendered.find((d: { kind?: string }) => d.kind === "ConfigMap") as { data?: Record<string, string> } | undefined;
  const dvmNamespace = config?.data?.RELAY_NAMESPACE;
  const leaseDurationMs = Number(config?.data?.RELAY_LEASE_DURATION_MS);
  if (!dvmNamespace || !Number.isFinite(leaseDurationMs)) throw new Error(`${RELAY_OVERLAY}: the ConfigMap sets no RELAY_NAMESPACE or lease duration`);

  // The namespace first (the Secrets live in it), then the Secrets, then everything else, so that the
  // pods start with both Secrets in place.
  await kubectl(options.kubeconfigPath, "apply", "-f", join(ROOT, "infra", "deploy", "k8s", "common", "namespace.yaml"));
  await upsertSecret(options.kubeConfig, "dvm-relay-aws", {
    AWS_ENDPOINT_URL: options.lambdaEndpoint,
    AWS_ACCESS_KEY_ID: "dvmlocal",
    AWS_SECRET_ACCESS_KEY: "dvmlocal",
  });
  await upsertSecret(options.kubeConfig, "dvm-relay-pod-clusters", { "destination.kubeconfig": await destinationPodsKubeconfig(options.destination) });
  await kubectl(options.kubeconfigPath, "apply", "-k", overlay);

  const apps = options.kubeConfig.makeApiClient(AppsV1Api);
  const core = options.kubeConfig.makeApiClient(CoreV1Api);
  const selector = "app.kubernetes.io/name=dvm-relay";
  const pods = async () =>
    (await core.listNamespacedPod({ namespace: RELAY_SYSTEM_NAMESPACE, labelSelector: selector })).items.filter((p) => !p.metadata?.deletionTimestamp);
  const isReady = (p: V1Pod) => p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
  return {
    dvmNamespace,
    leaseDurationMs,
    pods,
    async ready(timeoutMs = 300_000) {
      let ready: V1Pod[] = [];
      let seen: V1Pod[] = [];
      const describe = (p: V1Pod) =>
        `${p.metadata?.name}: ${p.status?.phase} ${JSON.stringify(p.status?.containerStatuses?.map((c) => c.state) ?? p.status?.conditions)}`;
      await waitFor(
        "the relay Deployment's replicas Ready",
        async () => {
          const deployment = await apps.readNamespacedDeployment({ namespace: RELAY_SYSTEM_NAMESPACE, name: DEPLOYMENT });
          const wanted = deployment.spec?.replicas ?? 1;
          seen = await pods();
          ready = seen.filter(isReady);
          return ready.length === wanted && deployment.status?.readyReplicas === wanted;
        },
        timeoutMs,
        () => seen.map(describe).join("\n"),
        500,
      );
      return ready;
    },
    async leader() {
      const lease = await options.kubeConfig
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ namespace: RELAY_SYSTEM_NAMESPACE, name: "dvm-relay" })
        .catch(() => undefined);
      return lease?.spec?.holderIdentity || undefined;
    },
    async forceDelete(pod) {
      await kubectl(options.kubeconfigPath, "-n", RELAY_SYSTEM_NAMESPACE, "delete", "pod", pod, "--force", "--grace-period=0", "--wait=false");
    },
    async logs(pod) {
      return (await kubectl(options.kubeconfigPath, "-n", RELAY_SYSTEM_NAMESPACE, "logs", pod)).stdout;
    },
    async remove() {
      await kubectl(options.kubeconfigPath, "-n", RELAY_SYSTEM_NAMESPACE, "delete", "deployment", DEPLOYMENT, "--ignore-not-found", "--wait=true");
    },
  };
}

/**
 * Phase executions that repeated, from the phase function's log ("phase started" / "phase completed"
 * lines with the DVM's uid and phase): a phase completed twice, or a phase that does not wait started
 * twice (a waiting phase starts once per poll, which is no repeat). Returns "uid/phase" for each.
 */
export function repeatedPhases(functionLog: string, uid?: string): string[] {
  const started = new Map<string, number>();
  const completed = new Map<string, number>();
  for (const line of functionLog.split("\n")) {
    const brace = line.indexOf("{");
    if (brace < 0) continue;
    let entry: { message?: unknown; uid?: unknown; phase?: unknown };
    try {
      entry = JSON.parse(line.slice(brace)) as typeof entry;
    } catch {
      continue;
    }
    if (typeof entry.uid !== "string" || typeof entry.phase !== "string" || (uid && entry.uid !== uid)) continue;
    const key = `${entry.uid}/${entry.phase}`;
    const count = (map: Map<string, number>) => map.set(key, (map.get(key) ?? 0) + 1);
    if (entry.message === "phase completed") count(completed);
    else if (entry.message === "phase started" && !(isPhaseName(entry.phase) && phaseSpec(entry.phase).waits)) count(started);
  }
  const repeated = new Set([...completed, ...started].filter(([, n]) => n > 1).map(([key]) => key));
  return [...repeated].sort();
}
