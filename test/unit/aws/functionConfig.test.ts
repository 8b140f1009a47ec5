/** The phase function's and the trigger's configuration modules (src/aws/phaseConfig.ts, triggerConfig.ts). */
import { describe, expect, it } from "vitest";
import { serviceNameOf } from "../../../src/aws/functionConfig";
import { parseEventsEnv, parsePhaseFunctionEnv } from "../../../src/aws/phaseConfig";
import { parseTriggerEnv } from "../../../src/aws/triggerConfig";
import { triggerFromEnv } from "../../../src/aws/triggerHandler";
import { ENV } from "../../../src/config/environment";
import { ConfigurationError } from "../../../src/config/error";
import { DEFAULT_MIGRATION_POLICY } from "../../../src/dvm/policy";
import { POLICY_ENV } from "../../../src/dvm/policyConfig";
import { silentLogger } from "../../../src/lib/log";

describe("the phase function's configuration", () => {
  it("needs the ledger table and names it when it is missing or blank", () => {
    for (const env of [{}, { [ENV.ledgerTable]: "  " }]) {
      expect(() => parsePhaseFunctionEnv(env)).toThrow(ConfigurationError);
      expect(() => parsePhaseFunctionEnv(env)).toThrow("phase function configuration: LEDGER_TABLE_NAME: is not set");
    }
  });

  it("reads the table, the kubeconfig parameter and the migration policy", () => {
    expect(parsePhaseFunctionEnv({ [ENV.ledgerTable]: " t ", [ENV.kubeconfigParameter]: "/dvm/dev/host", [POLICY_ENV.adminNamespaces]: "ops" })).toEqual({
      ledgerTableName: "t",
      kubeconfigParameter: "/dvm/dev/host",
      policy: { ...DEFAULT_MIGRATION_POLICY, adminNamespaces: ["ops"] },
    });
    expect(parsePhaseFunctionEnv({ [ENV.ledgerTable]: "t", [ENV.kubeconfigParameter]: "" })).not.toHaveProperty("kubeconfigParameter");
  });

  it("reads the credential grace in seconds, unset by default (the runner's 5 minutes), and refuses a bad one naming it", () => {
    expect(parsePhaseFunctionEnv({ [ENV.ledgerTable]: "t" })).not.toHaveProperty("credentialGraceMs");
    expect(parsePhaseFunctionEnv({ [ENV.ledgerTable]: "t", [ENV.clusterCredentialGraceSeconds]: "600" }).credentialGraceMs).toBe(600_000);
    expect(() => parsePhaseFunctionEnv({ [ENV.ledgerTable]: "t", [ENV.clusterCredentialGraceSeconds]: "5m" })).toThrow(
      /DVM_CLUSTER_CREDENTIAL_GRACE_SECONDS: /,
    );
  });

  it("reads the events' settings on their own, with their defaults", () => {
    expect(parseEventsEnv({ [ENV.eventsSink]: "EventBridge" })).toEqual({
      sink: { kind: "eventbridge", busName: "default" },
      source: "dvm-serverless",
      flushDeadlineMs: 1_500,
      maxQueue: 100,
    });
    expect(
      parseEventsEnv({ [ENV.eventsSink]: "http", [ENV.eventsHttpUrl]: "http://sink/x", [ENV.eventsHttpMode]: "binary", [ENV.eventsQueue]: "5" }),
    ).toMatchObject({
      sink: { kind: "http", url: "http://sink/x", mode: "binary" },
      maxQueue: 5,
    });
  });

  it("takes the service name from POWERTOOLS_SERVICE_NAME, else the function's own", () => {
    expect(serviceNameOf({}, "dvm-phase")).toBe("dvm-phase");
    expect(serviceNameOf({ [ENV.serviceName]: "dvm-dev" }, "dvm-phase")).toBe("dvm-dev");
  });
});

describe("the trigger's configuration", () => {
  it("reads the allow-lists, the admin namespaces, the size limit and the kubeconfig parameter", () => {
    expect(() => parseTriggerEnv({})).toThrow(/^trigger configuration: LEDGER_TABLE_NAME: is not set/);
    expect(parseTriggerEnv({ [ENV.ledgerTable]: "t" })).toEqual({
      ledgerTableName: "t",
      namespaces: { allowedNamespaces: [], adminNamespaces: ["dvm-system"], allowAdminNamespaces: false },
    });
    expect(
      parseTriggerEnv({
        [ENV.ledgerTable]: "t",
        [ENV.triggerAllowedSources]: "urn:a,urn:b*",
        [ENV.triggerAllowedNamespaces]: "shop, team-*",
        [ENV.triggerMaxEventAgeSeconds]: "600",
        [POLICY_ENV.adminNamespaces]: "ops",
        [ENV.triggerMaxEventBytes]: "1024",
        [ENV.kubeconfigParameter]: "/p",
      }),
    ).toEqual({
      allowedSources: "urn:a,urn:b*",
      namespaces: { allowedNamespaces: ["shop", "team-*"], adminNamespaces: ["ops"], allowAdminNamespaces: false },
      ledgerTableName: "t",
      maxEventAgeSeconds: 600,
      maxEventBytes: 1024,
      kubeconfigParameter: "/p",
    });
  });

  it("refuses a namespace list entry that is no namespace, naming the variable", () => {
    expect(() => parseTriggerEnv({ [ENV.triggerAllowedNamespaces]: "Shop" })).toThrow(/^trigger configuration: TRIGGER_ALLOWED_NAMESPACES/);
    expect(() => parseTriggerEnv({ [ENV.triggerAllowAdminNamespaces]: "yes" })).toThrow(/TRIGGER_ALLOW_ADMIN_NAMESPACES/);
  });

  it("refuses a size limit that is not a positive whole number, naming it (it used to fall back to the default)", () => {
    for (const value of ["0", "-5", "big", "1.5"]) {
      expect(() => triggerFromEnv({ [ENV.ledgerTable]: "t", [ENV.triggerMaxEventBytes]: value }, silentLogger)).toThrow(ConfigurationError);
      expect(() => parseTriggerEnv({ [ENV.ledgerTable]: "t", [ENV.triggerMaxEventBytes]: value })).toThrow(/^trigger configuration: TRIGGER_MAX_EVENT_BYTES: /);
    }
  });
});
