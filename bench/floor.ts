/**
 * The floor of a phase transition: the four requests a transition cannot do without, one after another,
 * with no logic around them — a GET of the DVM, a conditional claim and a conditional completion in the
 * ledger table, and a status PATCH guarded by the resourceVersion the GET returned. Same API server, same
 * DynamoDB, same kind of client (a keep-alive agent with the kubeconfig's credentials, the ledger's
 * DynamoDB client), so what a runner spends above it is its own overhead.
 *
 * Used by bench/overhead.ts, which measures the runner and this floor side by side in one run.
 */
import { randomUUID } from "node:crypto";
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from "node:https";
import { performance } from "node:perf_hooks";
import { type DynamoDBClient, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import type { KubeConfig } from "@kubernetes/client-node";
import { itemKey } from "../src/aws/ledger/codec";
import { EXECUTABLE_PHASES } from "../src/dvm/itinerary";
import { DVM_API_VERSION, DVM_PLURAL } from "../src/dvm/types";
import { resourcePath } from "../src/kube/rest";

export interface FloorTarget {
  /** Where the DVM lives (credentials and TLS as the kubeconfig says). */
  kubeConfig: KubeConfig;
  /** A DVM this floor may GET and whose status it may PATCH (nothing else drives it). */
  namespace: string;
  name: string;
  dynamo: DynamoDBClient;
  /** The ledger table (its key schema: uid + phaseKey). */
  tableName: string;
}

/** One sample: wall time of the four requests in a row, and each request's own time, ms. */
export interface FloorSample {
  totalMs: number;
  getMs: number;
  claimMs: number;
  completeMs: number;
  patchMs: number;
}

interface Answer {
  status: number;
  text: string;
}

/** A minimal JSON client over one keep-alive agent: what any client of the API server needs at least. */
class FloorKubeClient {
  private readonly server: URL;
  private readonly agent: HttpAgent | HttpsAgent;
  private readonly headers: Record<string, string>;

  private constructor(server: URL, agent: HttpAgent | HttpsAgent, headers: Record<string, string>) {
    this.server = server;
    this.agent = agent;
    this.headers = headers;
  }

  static async from(kubeConfig: KubeConfig): Promise<FloorKubeClient> {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error("floor: the kubeconfig has no current cluster");
    const server = new URL(cluster.server);
    // The kubeconfig's credentials once; the agent keeps its connections (one TLS handshake in all).
    const options: RequestOptions = { headers: {} };
    await kubeConfig.applyToHTTPSOptions(options);
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(options.headers ?? {})) if (typeof value === "string") headers[key] = value;
    if (options.auth) headers.Authorization = `Basic ${Buffer.from(options.auth).toString("base64")}`;
    const tls = {
      keepAlive: true,
      ...(options.ca ? { ca: options.ca } : {}),
      ...(options.cert ? { cert: options.cert } : {}),
      ...(options.key ? { key: options.key } : {}),
      ...(options.rejectUnauthorized !== undefined ? { rejectUnauthorized: options.rejectUnauthorized } : {}),
      ...(options.servername ? { servername: options.servername } : {}),
    };
    const agent = server.protocol === "http:" ? new HttpAgent({ keepAlive: true }) : new HttpsAgent(tls);
    return new FloorKubeClient(server, agent, headers);
  }

  request(method: "GET" | "PATCH", path: string, body?: unknown): Promise<Answer> {
    const url = new URL(this.server.pathname.replace(/\/$/, "") + path, this.server);
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string | number> = {
      ...this.headers,
      Accept: "application/json",
      ...(payload ? { "Content-Type": "application/merge-patch+json", "Content-Length": payload.length } : {}),
    };
    const call = url.protocol === "http:" ? httpRequest : httpsRequest;
    return new Promise((resolve, reject) => {
      const req = call(url, { method, headers, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.on("error", reject);
      if (payload) req.write(payload);
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

function ok(answer: Answer, what: string): Answer {
  if (answer.status < 200 || answer.status >= 300) throw new Error(`floor: ${what} answered ${answer.status}: ${answer.text.slice(0, 200)}`);
  return answer;
}

/**
 * Measures `samples` floors, one after another. Each sample claims a fresh ledger key (a new phase of a
 * made-up uid), so every claim is a first claim, as a transition's is.
 */
export class Floor {
  private readonly run = randomUUID().slice(0, 8);
  private next = 0;
  private conditions: Record<string, unknown>[] = [];

  private constructor(
    private readonly target: FloorTarget,
    private readonly kube: FloorKubeClient,
  ) {}

  static async start(target: FloorTarget): Promise<Floor> {
    return new Floor(target, await FloorKubeClient.from(target.kubeConfig));
  }

  /**
   * Gives the floor's DVM a status like a migration's (unmeasured), so the floor reads and writes objects
   * of the size a transition does: its GET returns that status, and each PATCH changes what a transition
   * changes (the description and the conditions, which a merge patch replaces whole).
   */
  async useStatus(status: { conditions?: unknown[] | undefined } & Record<string, unknown>): Promise<void> {
    const path = resourcePath(DVM_API_VERSION, DVM_PLURAL, this.target.namespace, this.target.name, "status");
    ok(await this.kube.request("PATCH", path, { status }), "PATCH status");
    this.conditions = (status.conditions ?? []) as Record<string, unknown>[];
  }

  async sample(): Promise<FloorSample> {
    const { namespace, name, dynamo, tableName } = this.target;
    const i = this.next++;
    const phases = EXECUTABLE_PHASES.length;
    const key = itemKey({ uid: `floor-${this.run}-${Math.floor(i / phases)}`, phase: EXECUTABLE_PHASES[i % phases]!, generation: 1 });
    const path = resourcePath(DVM_API_VERSION, DVM_PLURAL, namespace, name);
    const t0 = performance.now();
    const dvm = JSON.parse(ok(await this.kube.request("GET", path), "GET").text) as { metadata: { resourceVersion: string } };
    const t1 = performance.now();
    const now = Date.now();
    await dynamo.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: key,
        ConditionExpression: "attribute_not_exists(#uid)",
        UpdateExpression: "SET #state = :running, #attempt = :one, #leaseExpiresAt = :lease",
        ExpressionAttributeNames: { "#uid": "uid", "#state": "state", "#attempt": "attempt", "#leaseExpiresAt": "leaseExpiresAt" },
        ExpressionAttributeValues: { ":running": { S: "RUNNING" }, ":one": { N: "1" }, ":lease": { N: String(now + 120_000) } },
        ReturnValues: "ALL_NEW",
      }),
    );
    const t2 = performance.now();
    await dynamo.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: key,
        ConditionExpression: "#state = :running AND #attempt = :one",
        UpdateExpression: "SET #state = :completed, #finishedAt = :now REMOVE #leaseExpiresAt",
        ExpressionAttributeNames: { "#state": "state", "#attempt": "attempt", "#finishedAt": "finishedAt", "#leaseExpiresAt": "leaseExpiresAt" },
        ExpressionAttributeValues: { ":running": { S: "RUNNING" }, ":completed": { S: "COMPLETED" }, ":one": { N: "1" }, ":now": { N: String(Date.now()) } },
      }),
    );
    const t3 = performance.now();
    ok(
      await this.kube.request("PATCH", `${path}/status`, {
        metadata: { resourceVersion: dvm.metadata.resourceVersion },
        status: {
          phaseDescription: `floor sample ${i}`,
          conditions: this.conditions.map((condition, k) => (k === 0 ? { ...condition, message: `floor sample ${i}` } : condition)),
        },
      }),
      "PATCH status",
    );
    const t4 = performance.now();
    return { totalMs: t4 - t0, getMs: t1 - t0, claimMs: t2 - t1, completeMs: t3 - t2, patchMs: t4 - t3 };
  }

  close(): void {
    this.kube.close();
  }
}
