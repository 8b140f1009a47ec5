/** Which pod changes are milestones a wait phase ends on, and how many pods one DVM's record keeps. */
import { describe, expect, it } from "vitest";
import { MAX_TRACKED_PODS_PER_DVM, PodPhases } from "../../../src/relay/podPhases";

const pod = (phase?: string, labels: Record<string, string> = {}) => ({ metadata: { labels }, status: phase === undefined ? {} : { phase } });

describe("PodPhases", () => {
  it("calls a pod's first arrival in Running, Succeeded or Failed a milestone, and its going; nothing else", () => {
    const pods = new PodPhases();
    // A kubelet's writes while the pod starts: created, scheduled, containers creating.
    expect(pods.observe("source/ns/client-1", "ADDED", pod())).toBe(false);
    expect(pods.observe("source/ns/client-1", "MODIFIED", pod("Pending"))).toBe(false);
    expect(pods.observe("source/ns/client-1", "MODIFIED", pod("Pending"))).toBe(false);
    expect(pods.observe("source/ns/client-1", "MODIFIED", pod("Running"))).toBe(true);
    // One container done, the other still running: the same phase again.
    expect(pods.observe("source/ns/client-1", "MODIFIED", pod("Running"))).toBe(false);
    expect(pods.observe("source/ns/client-1", "MODIFIED", pod("Succeeded"))).toBe(true);
    // The kubelet's last condition update after the sandbox stopped.
    expect(pods.observe("source/ns/client-1", "MODIFIED", pod("Succeeded"))).toBe(false);
    expect(pods.observe("source/ns/client-1", "DELETED", pod("Succeeded"))).toBe(true);
    expect(pods.size).toBe(0);
    // The same name on another cluster is another pod.
    expect(pods.observe("source/ns/server", "MODIFIED", pod("Running"))).toBe(true);
    expect(pods.observe("destination/ns/server", "MODIFIED", pod("Running"))).toBe(true);
    expect(pods.observe("destination/ns/x", "MODIFIED", { status: { phase: 7 } })).toBe(false);
    expect(pods.observe("destination/ns/y", "MODIFIED", null)).toBe(false);
  });

  it("gives a relabelled pod no milestone however often it changes (a tenant's own pod labelled as its DVM's)", () => {
    const pods = new PodPhases();
    expect(pods.observe("source/ns/mine", "ADDED", pod("Running"))).toBe(true);
    for (let i = 0; i < 1_000; i++) expect(pods.observe("source/ns/mine", "MODIFIED", pod("Running", { n: String(i) }))).toBe(false);
  });

  it(`remembers at most ${MAX_TRACKED_PODS_PER_DVM} pods of one DVM; a pod past that has no milestones until one goes`, () => {
    const pods = new PodPhases();
    for (let i = 0; i < MAX_TRACKED_PODS_PER_DVM; i++) expect(pods.observe(`source/ns/p${i}`, "ADDED", pod("Pending"))).toBe(false);
    expect(pods.observe("source/ns/late", "MODIFIED", pod("Running"))).toBe(false);
    expect(pods.size).toBe(MAX_TRACKED_PODS_PER_DVM);
    // Known pods keep theirs.
    expect(pods.observe("source/ns/p0", "MODIFIED", pod("Running"))).toBe(true);
    expect(pods.observe("source/ns/p1", "DELETED", pod("Pending"))).toBe(true);
    expect(pods.observe("source/ns/late", "MODIFIED", pod("Succeeded"))).toBe(true);
  });
});
