/**
 * CreateRsyncConfig and CreateStunnelConfig: the rsync password and the migration's PKI are created once
 * on the host (create-or-adopt, so a repeated phase reuses them), then rendered into one transfer Secret
 * per rsync server pod (server side, serverGroups.ts) and one per volume on the source (client side, which
 * names the endpoint of the server pod that mounts its destination PVC). The client side dials the
 * operator's HTTP CONNECT proxy when the policy names one: DVM_STUNNEL_TCP_PROXY in admin namespaces,
 * DVM_STUNNEL_TCP_PROXY_TENANT elsewhere (src/dvm/proxyPolicy.ts).
 */
import { MigrationInputError } from "../contracts/inputError";
import { KINDS, type KubeObject, refOf } from "../kube/objects";
import {
  clientTransferSecretData,
  generateRsyncPassword,
  generateTransferPki,
  moduleCredential,
  moduleNameFor,
  serverTransferSecretData,
  type TransferPki,
  transferSecret,
} from "../transfer";
import { servedPvcs } from "./blockVolumes";
import { endpointAddress } from "./endpoint";
import { dvmShortId, ownerLabels, TRANSFER_SERVER_NAME, transferLabels, transferNames } from "./names";
import { serverGroupOf, serverGroups } from "./serverGroups";
import { advance, type PhaseBody, type PhaseContext, wait } from "./types";
import { specField, type VolumePair } from "./volumes";

interface SecretObject extends KubeObject {
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

const decode = (secret: SecretObject, key: string): string | undefined => {
  const value = secret.data?.[key];
  return value === undefined ? secret.stringData?.[key] : Buffer.from(value, "base64").toString("utf8");
};

/** Creates the host Secret from `generate()` unless it exists; returns the adopted or created values. */
async function hostSecret(
  ctx: PhaseContext,
  name: string,
  keys: readonly string[],
  generate: () => Promise<Record<string, string>>,
): Promise<Record<string, string>> {
  const { host } = ctx.clusters;
  const existing = await host.get<SecretObject>(refOf("Secret", ctx.dvm.namespace, name));
  const secret =
    existing ??
    (
      await host.ensure<SecretObject>({
        ...KINDS.Secret,
        type: "Opaque",
        metadata: {
          name,
          namespace: ctx.dvm.namespace,
          labels: ownerLabels(ctx.dvm),
          // Deleted with the DVM by the garbage collector, even if cleanup never runs.
          ownerReferences: [
            { apiVersion: "migration.openshift.io/v1alpha1", kind: "DirectVolumeMigration", name: ctx.dvm.name, uid: ctx.dvm.uid, controller: true },
          ],
        },
        stringData: await generate(),
      })
    ).object;
  const values: Record<string, string> = {};
  for (const key of keys) {
    const value = decode(secret, key);
    if (value === undefined) throw new Error(`host Secret ${ctx.dvm.namespace}/${name} lacks key ${key}`);
    values[key] = value;
  }
  return values;
}

const PASSWORD_KEY = "password";
const PKI_KEYS = ["caCertPem", "serverCertPem", "serverKeyPem", "clientCertPem", "clientKeyPem"] as const;

export function rsyncPassword(ctx: PhaseContext): Promise<string> {
  return hostSecret(ctx, transferNames(ctx.dvm).credentialsSecret, [PASSWORD_KEY], async () => ({ [PASSWORD_KEY]: generateRsyncPassword() })).then(
    (v) => v[PASSWORD_KEY]!,
  );
}

export async function transferPki(ctx: PhaseContext): Promise<TransferPki> {
  const values = await hostSecret(ctx, transferNames(ctx.dvm).pkiSecret, PKI_KEYS, async () => {
    const pki = await generateTransferPki({ commonName: `dvm-${dvmShortId(ctx.dvm)}`, serverDnsNames: [TRANSFER_SERVER_NAME], includeLoopback: false });
    return { ...pki };
  });
  return values as unknown as TransferPki;
}

export function clientSecretName(ctx: Pick<PhaseContext, "dvm">, pair: Pick<VolumePair, "id">): string {
  return `${transferNames(ctx.dvm).rsyncClientSecret}-${pair.id}`;
}

export const createRsyncConfig: PhaseBody = async (ctx) => {
  await rsyncPassword(ctx);
  return advance();
};

export const createStunnelConfig: PhaseBody = async (ctx) => {
  const { source, destination } = ctx.clusters;
  const password = await rsyncPassword(ctx);
  const pki = await transferPki(ctx);
  const runAsRoot = ctx.spec.runAsRoot ?? false;

  for (const group of serverGroups(ctx)) {
    const pvcs = await servedPvcs(ctx, group);
    const data = serverTransferSecretData({ pvcs, rsyncSecret: password, pki, runAsRoot });
    await destination.ensure(
      transferSecret({ name: group.names.rsyncServerSecret, namespace: group.namespace, labels: transferLabels(ctx.dvm, "rsync-server"), data }),
    );
  }
  for (const pair of ctx.volumes) {
    // The endpoint of the server pod that mounts this pair's destination PVC.
    const group = serverGroupOf(ctx, pair);
    const address = await endpointAddress(ctx, group);
    // The endpoint was ready one phase ago; if it lost its address since, wait for it again.
    if ("pending" in address) return wait(`endpoint of ${group.namespace}/${group.names.endpointService}: ${address.pending}`);
    // Through the operator's HTTP CONNECT proxy, if any: the one this Secret's namespace may read.
    const proxy = ctx.transfer.tcpProxyFor(pair.from.namespace);
    // The policy refused this DVM before any pod (policyViolations); this stays true if a caller did not ask it.
    if (proxy.kind === "refused") throw new MigrationInputError([`${specField(pair, "namespace")}: ${proxy.reason}`]);
    const data = clientTransferSecretData({
      // This volume's module only: the source namespace's tenant can read this Secret.
      password: moduleCredential(password, moduleNameFor(pair.to)).password,
      pki,
      endpointHost: address.host,
      endpointPort: address.port,
      checkHost: TRANSFER_SERVER_NAME,
      ...(proxy.kind === "proxy" ? { proxy: proxy.proxy } : {}),
    });
    await source.ensure(
      transferSecret({ name: clientSecretName(ctx, pair), namespace: pair.from.namespace, labels: transferLabels(ctx.dvm, "rsync-client"), data }),
    );
  }
  return advance();
};
