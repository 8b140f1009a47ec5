/**
 * The transfer pods as the real API server's Pod Security admission judges them: unprivileged pods meet
 * the "restricted" standard, and pods that run rsync as root (to keep file ownership) still meet
 * "baseline". Server-side dry runs: nothing is scheduled.
 */
import { CoreV1Api, type KubernetesObject, KubernetesObjectApi } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import { rsyncClientPod, rsyncServerPod } from "../../src/transfer";
import { testClusters } from "../support/clusters";

const { source } = testClusters();
const run = Date.now().toString(36);
const restricted = `psa-restricted-${run}`;
const baseline = `psa-baseline-${run}`;

function pods(namespace: string, runAsRoot: boolean): KubernetesObject[] {
  const common = { namespace, runAsRoot, configSecretName: "transfer", identity: runAsRoot ? {} : { runAsUser: 1001, runAsGroup: 1001 } };
  return [
    rsyncServerPod({ ...common, name: "server", pvcs: [{ namespace, name: "data" }] }),
    rsyncClientPod({ ...common, name: "client", sourcePvc: { namespace, name: "data" }, destinationPvc: { namespace, name: "data" }, user: "dvm" }),
  ] as unknown as KubernetesObject[];
}

async function admitted(pod: KubernetesObject): Promise<string | true> {
  try {
    await KubernetesObjectApi.makeApiClient(source).create(pod, undefined, "All");
    return true;
  } catch (error) {
    const body = (error as { body?: string }).body;
    return typeof body === "string" ? (JSON.parse(body) as { message: string }).message : String(error);
  }
}

beforeAll(async () => {
  const core = source.makeApiClient(CoreV1Api);
  for (const [name, level] of [
    [restricted, "restricted"],
    [baseline, "baseline"],
  ] as const) {
    await core.createNamespace({ body: { metadata: { name, labels: { "pod-security.kubernetes.io/enforce": level } } } });
  }
});

describe("transfer pods under Pod Security admission", () => {
  it("meet the restricted standard when unprivileged", async () => {
    for (const pod of pods(restricted, false)) expect(await admitted(pod), pod.metadata?.name).toBe(true);
  });

  it("need no more than baseline when rsync runs as root, and are refused by restricted", async () => {
    for (const pod of pods(baseline, true)) expect(await admitted(pod), pod.metadata?.name).toBe(true);
    for (const pod of pods(restricted, true)) expect(await admitted(pod)).toMatch(/violates PodSecurity "restricted/);
  });
});
