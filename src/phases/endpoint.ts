/**
 * The endpoint that exposes each rsync server pod (through stunnel; serverGroups.ts): a Service of the
 * requested type, or an OpenShift Route (TLS passthrough) in front of a ClusterIP Service.
 */
import { LABEL } from "../contracts/labels";
import { CONDITION } from "../dvm/conditions";
import type { EndpointType } from "../dvm/types";
import { KINDS, type KubeObject, refOf, type ServiceObject } from "../kube/objects";
import { STUNNEL_PORT, transferLabels } from "./names";
import { type ServerGroup, serverGroups } from "./serverGroups";
import { warnWhenWaitingLong } from "./timing";
import { advance, type PhaseBody, type PhaseContext, wait } from "./types";

export const SERVER_ROLE = "rsync-server";

export function endpointTypeOf(ctx: Pick<PhaseContext, "spec">): EndpointType {
  return ctx.spec.endpointType ?? "ClusterIP";
}

/** The labels of a group's server pod; its Service selects exactly that pod by them. */
export function serverPodLabels(ctx: Pick<PhaseContext, "dvm">, group: Pick<ServerGroup, "index">): Record<string, string> {
  return { ...transferLabels(ctx.dvm, SERVER_ROLE), [LABEL.serverGroup]: String(group.index) };
}

export function endpointService(ctx: PhaseContext, group: ServerGroup): ServiceObject {
  const type = endpointTypeOf(ctx);
  return {
    ...KINDS.Service,
    metadata: { name: group.names.endpointService, namespace: group.namespace, labels: transferLabels(ctx.dvm, "endpoint") },
    spec: {
      type: type === "Route" ? "ClusterIP" : type,
      selector: serverPodLabels(ctx, group),
      ports: [{ name: "stunnel", port: STUNNEL_PORT, targetPort: STUNNEL_PORT, protocol: "TCP" }],
    },
  };
}

export function endpointRoute(ctx: PhaseContext, group: ServerGroup): KubeObject {
  return {
    ...KINDS.Route,
    metadata: { name: group.names.endpointRoute, namespace: group.namespace, labels: transferLabels(ctx.dvm, "endpoint") },
    spec: {
      to: { kind: "Service", name: group.names.endpointService },
      port: { targetPort: STUNNEL_PORT },
      tls: { termination: "passthrough" },
    },
  };
}

export const createRsyncEndpoint: PhaseBody = async (ctx) => {
  const { destination } = ctx.clusters;
  for (const group of serverGroups(ctx)) {
    await destination.ensure(endpointService(ctx, group));
    if (endpointTypeOf(ctx) === "Route") await destination.ensure(endpointRoute(ctx, group));
  }
  return advance();
};

export interface EndpointAddress {
  host: string;
  port: number;
}

interface RouteObject extends KubeObject {
  status?: { ingress?: { host?: string; conditions?: { type: string; status: string }[] }[] };
}

interface NodeObject extends KubeObject {
  status?: { addresses?: { type: string; address: string }[] };
}

/**
 * Where a client on the source reaches the rsync server pod of `group`, or why it cannot yet.
 * Read fresh each time rather than stored: the address of a LoadBalancer or Route appears later.
 */
export async function endpointAddress(ctx: PhaseContext, group: ServerGroup): Promise<EndpointAddress | { pending: string }> {
  const { destination } = ctx.clusters;
  const { namespace, names } = group;
  const service = await destination.get<ServiceObject>(refOf("Service", namespace, names.endpointService));
  if (!service) return { pending: `Service ${namespace}/${names.endpointService} does not exist` };
  switch (endpointTypeOf(ctx)) {
    case "ClusterIP":
      // The address, not the Service's DNS name: it needs no cluster DNS, and the certificate is checked
      // by a fixed name anyway (TRANSFER_SERVER_NAME).
      return service.spec?.clusterIP ? { host: service.spec.clusterIP, port: STUNNEL_PORT } : { pending: "no cluster IP assigned yet" };
    case "LoadBalancer": {
      const ingress = service.status?.loadBalancer?.ingress?.[0];
      const host = ingress?.ip ?? ingress?.hostname;
      return host ? { host, port: STUNNEL_PORT } : { pending: "the load balancer has no address yet" };
    }
    case "NodePort": {
      const nodePort = service.spec?.ports?.[0]?.nodePort;
      if (!nodePort) return { pending: "no node port assigned yet" };
      const nodes = await destination.list<NodeObject>(KINDS.Node, undefined, {});
      const address = nodes.flatMap((n) => n.status?.addresses ?? []).find((a) => a.type === "InternalIP" || a.type === "ExternalIP");
      return address ? { host: address.address, port: nodePort } : { pending: "no node address found" };
    }
    case "Route": {
      const route = await destination.get<RouteObject>(refOf("Route", namespace, names.endpointRoute));
      const ingress = route?.status?.ingress?.find((i) => i.conditions?.some((c) => c.type === "Admitted" && c.status === "True"));
      return ingress?.host ? { host: ingress.host, port: 443 } : { pending: "the Route is not admitted yet" };
    }
  }
}

export const ensureRsyncEndpointReady: PhaseBody = async (ctx) => {
  const pending: string[] = [];
  for (const group of serverGroups(ctx)) {
    const address = await endpointAddress(ctx, group);
    if ("pending" in address) pending.push(`${group.namespace}/${group.names.endpointService}: ${address.pending}`);
  }
  if (pending.length === 0) return advance();
  return wait(pending.join("; "), {
    warnings: warnWhenWaitingLong(ctx, { type: CONDITION.RsyncEndpointNotReady, reason: "NotReady", message: pending.join("; ") }),
  });
};
