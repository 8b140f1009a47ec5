/**
 * The whole controller on one machine: DynamoDB Local (or the endpoint AWS_ENDPOINT_URL* names), the phase
 * function behind serverless-offline's Lambda Invoke API (the API the relay uses against AWS), and the
 * relay watching the cluster in KUBECONFIG — or, when none is configured, two embedded control planes with
 * kwok ("source", which hosts the DVMs, and "destination") and a small demo to migrate.
 * `npm start` (src/cli/start.ts) and the end-to-end tests both use this.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, StorageV1Api } from "@kubernetes/client-node";
import { createLedgerClient, ensureLedgerTable } from "../ledger";
import type { Logger } from "../log";
import { runRelay } from "../relay/main";
import { startControlPlane, type ControlPlane } from "./controlPlane";
import { startDynamoLocal, type DynamoLocal } from "./dynamoLocal";
import { findFreePort } from "./ports";
import { startServerlessOffline, type ServerlessOffline } from "./serverlessOffline";

export interface LocalControllerOptions {
  /** The host cluster's kubeconfig; default $KUBECONFIG; neither: embedded control planes. */
  kubeconfig?: string;
  ledgerTableName?: string;
  /** More clusters whose pods the relay watches (the destination, when KUBECONFIG is given). */
  podClusters?: { name: string; kubeconfigPath: string }[];
  /** Relay health port; default a free one. */
  healthPort?: number;
  /** Where the embedded clusters' kubeconfigs and the demo files go. */
  stateDir: string;
  log: Logger;
  /** Progress lines for a person ("starting DynamoDB Local ..."). */
  say?: (line: string) => void;
}

export interface LocalController {
  /** Where the DVMs live; its kubeconfig path. */
  hostKubeconfig: string;
  /** Set when the control planes are embedded. */
  embedded?: { destinationKubeconfig: string; demoManifest: string };
  dynamoEndpoint: string;
  ledgerTableName: string;
  lambdaEndpoint: string;
  /** The trigger's HTTP route: CloudEvents are POSTed here. */
  triggerUrl: string;
  /** Lambda names behind `lambdaEndpoint`, for `aws lambda invoke --function-name`. */
  functionNames: { phase: string; trigger: string };
  /** Everything the phase function printed (its structured log lines). */
  functionLogFile: string;
  healthUrl: string;
  stop(): Promise<void>;
}

/** The local DynamoDB and Lambda endpoints need credentials the SDK accepts; nothing checks them. */
const LOCAL_CREDENTIALS = { AWS_ACCESS_KEY_ID: "dvmlocal", AWS_SECRET_ACCESS_KEY: "dvmlocal" };

export async function startLocalController(options: LocalControllerOptions): Promise<LocalController> {
  const say = options.say ?? (() => {});
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((error) => options.log.warn("stop failed", { error: String(error) }));
  };
  try {
    mkdirSync(join(options.stateDir, "logs"), { recursive: true });
    process.env.AWS_REGION ??= "us-east-1";

    // 1. Clusters.
    let hostKubeconfig = options.kubeconfig ?? process.env.KUBECONFIG;
    let embedded: LocalController["embedded"];
    if (!hostKubeconfig) {
      say("no KUBECONFIG: starting two embedded control planes (kube-apiserver + etcd + kwok)");
      const planes: ControlPlane[] = [];
      for (const name of ["source", "destination"]) {
        const plane = await startControlPlane({ name, logDir: join(options.stateDir, "logs", name) });
        planes.push(plane);
        stops.push(() => plane.stop());
      }
      const [source, destination] = planes as [ControlPlane, ControlPlane];
      hostKubeconfig = join(options.stateDir, "source.kubeconfig");
      const destinationKubeconfig = join(options.stateDir, "destination.kubeconfig");
      writeFileSync(hostKubeconfig, source.kubeConfig().exportConfig(), { mode: 0o600 });
      writeFileSync(destinationKubeconfig, destination.kubeConfig().exportConfig(), { mode: 0o600 });
      embedded = { destinationKubeconfig, demoManifest: await seedDemo(source.kubeConfig(), destination.kubeConfig(), options.stateDir) };
    }

    // The relay and the function read the host cluster from KUBECONFIG.
    process.env.KUBECONFIG = hostKubeconfig;

    // 2. The ledger.
    let dynamoEndpoint = process.env.AWS_ENDPOINT_URL_DYNAMODB ?? process.env.AWS_ENDPOINT_URL;
    if (!dynamoEndpoint) {
      say("starting DynamoDB Local");
      const dynamo: DynamoLocal = await startDynamoLocal({ logDir: join(options.stateDir, "logs") });
      stops.push(() => dynamo.stop());
      dynamoEndpoint = dynamo.endpoint;
      process.env.AWS_ENDPOINT_URL_DYNAMODB = dynamoEndpoint;
      Object.assign(process.env, { ...LOCAL_CREDENTIALS, ...pick(process.env, Object.keys(LOCAL_CREDENTIALS)) });
    }
    const ledgerTableName = options.ledgerTableName ?? "dvm-local-ledger";
    await ensureLedgerTable(createLedgerClient({ endpoint: dynamoEndpoint }), ledgerTableName);

    // 3. The phase function behind the Lambda Invoke API.
    say("bundling the phase function and starting serverless-offline");
    const offline: ServerlessOffline = await startServerlessOffline({
      env: { LEDGER_TABLE_NAME: ledgerTableName, KUBECONFIG: hostKubeconfig, AWS_ENDPOINT_URL_DYNAMODB: dynamoEndpoint },
      logFile: join(options.stateDir, "logs", "phase-function.log"),
    });
    stops.push(() => offline.stop());

    // 4. The relay, invoking it. RequestResponse locally, so the relay sees each result's requeue delay.
    process.env.AWS_ENDPOINT_URL_LAMBDA = offline.lambdaEndpoint;
    const healthPort = options.healthPort ?? (await findFreePort("127.0.0.1"));
    const stopRelay = await runRelay(
      {
        KUBECONFIG: hostKubeconfig,
        RELAY_FUNCTION_NAME: offline.functionName(),
        RELAY_INVOCATION_TYPE: "RequestResponse",
        RELAY_HEALTH_PORT: String(healthPort),
        RELAY_RESYNC_MS: "30000",
        ...podClustersEnv(embedded ? [{ name: "destination", kubeconfigPath: embedded.destinationKubeconfig }] : (options.podClusters ?? [])),
      },
      options.log,
    );
    stops.push(stopRelay);

    return {
      hostKubeconfig,
      ...(embedded ? { embedded } : {}),
      dynamoEndpoint,
      ledgerTableName,
      lambdaEndpoint: offline.lambdaEndpoint,
      triggerUrl: `${offline.httpEndpoint}/migrations`,
      functionNames: { phase: offline.functionName(), trigger: offline.triggerFunctionName },
      functionLogFile: offline.logFile,
      healthUrl: `http://127.0.0.1:${healthPort}/readyz`,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

function podClustersEnv(clusters: { name: string; kubeconfigPath: string }[]): Record<string, string> {
  return clusters.length > 0 ? { RELAY_POD_CLUSTERS: clusters.map((c) => `${c.name}=${c.kubeconfigPath}`).join(",") } : {};
}

function pick(env: NodeJS.ProcessEnv, keys: string[]): Record<string, string> {
  return Object.fromEntries(keys.flatMap((k) => (env[k] ? [[k, env[k]!]] : [])));
}

/**
 * A sandbox to try a migration on: namespace "demo" with two PVCs on the source, a StorageClass
 * "standard" on the destination, and the destination's kubeconfig as a Secret next to the DVMs.
 * Returns the path of a ready-to-apply DVM manifest.
 */
async function seedDemo(source: KubeConfig, destination: KubeConfig, stateDir: string): Promise<string> {
  const core = source.makeApiClient(CoreV1Api);
  const exists = (error: unknown) => {
    if ((error as { code?: number }).code !== 409) throw error;
  };
  await core.createNamespace({ body: { metadata: { name: "demo", labels: { team: "demo" } } } }).catch(exists);
  for (const [name, size] of [["data", "1Gi"], ["uploads", "2Gi"]] as const) {
    await core
      .createNamespacedPersistentVolumeClaim({ namespace: "demo", body: { metadata: { name }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: size } } } } })
      .catch(exists);
  }
  await destination.makeApiClient(StorageV1Api).createStorageClass({ body: { metadata: { name: "standard" }, provisioner: "kubernetes.io/no-provisioner" } }).catch(exists);
  await core
    .createNamespacedSecret({ namespace: "default", body: { metadata: { name: "destination-kubeconfig" }, stringData: { kubeconfig: destination.exportConfig() } } })
    .catch(exists);
  const manifest = join(stateDir, "demo-dvm.yaml");
  writeFileSync(
    manifest,
    `apiVersion: migration.openshift.io/v1alpha1
kind: DirectVolumeMigration
metadata:
  name: demo
  namespace: default
spec:
  destinationCluster:
    kubeconfigSecretRef:
      name: destination-kubeconfig
  persistentVolumeClaims:
    - name: data
      namespace: demo
      targetStorageClass: standard
      targetAccessModes: [ReadWriteOnce]
    - name: uploads
      namespace: demo
      targetStorageClass: standard
      targetAccessModes: [ReadWriteOnce]
`,
  );
  return manifest;
}
