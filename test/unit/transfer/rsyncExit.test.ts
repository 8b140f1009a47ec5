import { describe, expect, it } from "vitest";
import { rsyncRetry } from "../../../src/transfer/rsyncExit";

describe("rsyncRetry", () => {
  it.each([1, 2, 3, 4, 6, 25])("does not retry exit code %i: the same request fails the same way", (code) => {
    expect(rsyncRetry(code, "")).toMatchObject({ retry: false, why: expect.stringContaining(`exit code ${code}`) });
  });

  it.each([10, 11, 12, 13, 14, 20, 21, 22, 30, 35, 124, 137, 143, 99])("retries exit code %i: the network, a pod or a node may change", (code) => {
    expect(rsyncRetry(code, "")).toEqual({ retry: true });
  });

  it("retries when the container has no exit code (pod deleted, evicted)", () => {
    expect(rsyncRetry(undefined, "")).toEqual({ retry: true });
  });

  it("code 5: a daemon refusal is final, except its connection limit; no greeting (tunnel closed) is retried", () => {
    const refused = (line: string) => `${line}\nrsync error: error starting client-server protocol (code 5) at main.c(1954) [sender=3.5.0]`;
    expect(rsyncRetry(5, refused("@ERROR: chdir failed"))).toEqual({
      retry: false,
      why: "rsync exit code 5: the daemon refused the connection (@ERROR: chdir failed)",
    });
    expect(rsyncRetry(5, refused("@ERROR: auth failed on module pvc-0123"))).toMatchObject({ retry: false });
    expect(rsyncRetry(5, refused("@ERROR: max connections (1) reached -- try again later"))).toEqual({ retry: true });
    expect(rsyncRetry(5, refused("rsync: did not see server greeting"))).toEqual({ retry: true });
  });

  it("code 23: final when every error is a missing permission, retried otherwise", () => {
    const end = "rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1394) [sender=3.5.0]";
    const denied = [
      'rsync: [sender] send_files failed to open "/mnt/source/a": Permission denied (13)',
      'rsync: [generator] failed to set times on "b": Operation not permitted (1)',
    ];
    expect(rsyncRetry(23, [...denied, end].join("\n"))).toMatchObject({ retry: false });
    expect(rsyncRetry(23, [...denied, 'rsync: [sender] read errors mapping "/mnt/source/c": Input/output error (5)', end].join("\n"))).toEqual({ retry: true });
    expect(rsyncRetry(23, end)).toEqual({ retry: true });
  });
});
