/**
 * The global options and what they resolve to: the host cluster (where the DVMs live) from a kubeconfig,
 * and the phase ledger from a table name and a DynamoDB endpoint. Both are loaded on first use, so a
 * command that needs only one of them never fails for want of the other.
 */

import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { createLedgerClient, DynamoPhaseLedger } from "../aws/ledger";
import { ENV } from "../config/environment";
import { KubeDvmStore } from "../kube/dvmStore";
import { KubeCluster } from "../kube/kubeCluster";
import { KubeConfig } from "../kube/kubeConfig";
import { parseCliEnv } from "./config";
import { CliError, type ErrorContext } from "./errors";
import type { CliIo } from "./io";

export interface GlobalOptions {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  table?: string;
  dynamodbEndpoint?: string;
}

export interface HostCluster {
  kubeConfig: KubeConfig;
  server: string;
  /** -n, else the kubeconfig context's namespace, else "default". */
  namespace: string;
  store: KubeDvmStore;
  cluster: KubeCluster;
}

const SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/** Loads the kubeconfig as kubectl would pick it: --kubeconfig, KUBECONFIG, ~/.kube/config, in-cluster. */
export function loadKubeConfig(options: GlobalOptions, io: Pick<CliIo, "env" | "cwd">): KubeConfig {
  const kc = new KubeConfig();
  const env = parseCliEnv(io.env);
  const fromEnv = env.kubeconfigFiles;
  const home = env.home ?? homedir();
  const files = options.kubeconfig
    ? [resolve(io.cwd, options.kubeconfig)]
    : fromEnv.length > 0
      ? fromEnv.map((f) => resolve(io.cwd, f))
      : existsSync(join(home, ".kube", "config"))
        ? [join(home, ".kube", "config")]
        : [];
  if (files.length === 0) {
    if (env.inCluster && existsSync(SERVICE_ACCOUNT_TOKEN)) {
      kc.loadFromCluster();
      return kc;
    }
    throw new CliError(`no cluster configured: pass --kubeconfig FILE or set ${ENV.kubeconfig} (there is no ~/.kube/config)`);
  }
  for (const [i, file] of files.entries()) {
    if (!existsSync(file)) {
      throw new CliError(`kubeconfig ${file} does not exist: fix ${options.kubeconfig ? "--kubeconfig" : ENV.kubeconfig}`);
    }
    const target = i === 0 ? kc : new KubeConfig();
    try {
      target.loadFromFile(file);
    } catch (error) {
      throw new CliError(`kubeconfig ${file} cannot be read: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`);
    }
    if (target !== kc) kc.mergeConfig(target, true);
  }
  if (options.context) {
    if (!kc.getContextObject(options.context)) {
      const known = kc.getContexts().map((c) => c.name);
      throw new CliError(`context "${options.context}" is not in the kubeconfig (it has: ${known.join(", ") || "none"}): fix --context`);
    }
    kc.setCurrentContext(options.context);
  }
  if (!kc.getCurrentCluster()) {
    throw new CliError(`the kubeconfig (${files.join(delimiter)}) has no current context with a cluster: pass --context`);
  }
  return kc;
}

export function namespaceOf(kc: KubeConfig, options: GlobalOptions): string {
  return options.namespace || kc.getContextObject(kc.getCurrentContext())?.namespace || "default";
}

function isLoopback(endpoint: string): boolean {
  try {
    const host = new URL(endpoint).hostname;
    return host === "localhost" || host === "127.0.0.1" || host === "::1" || host === "[::1]";
  } catch {
    return false;
  }
}

export interface LedgerAccess {
  ledger: DynamoPhaseLedger;
  table: string;
  /** For messages: the endpoint URL, or "AWS (region …)". */
  endpoint: string;
}

/**
 * The ledger of --table at --dynamodb-endpoint (default: what the SDK reads, AWS_ENDPOINT_URL_DYNAMODB
 * then AWS_ENDPOINT_URL). A local endpoint with no AWS credentials in the environment gets the same
 * dummy ones the project's local setup uses, as DynamoDB Local needs some.
 */
export function openLedger(options: GlobalOptions, io: Pick<CliIo, "env">): LedgerAccess {
  const env = parseCliEnv(io.env);
  const table = options.table || env.ledgerTable;
  if (!table) throw new CliError(`no ledger table: pass --table NAME or set ${ENV.ledgerTable}`);
  const endpoint = options.dynamodbEndpoint || env.dynamoEndpoint;
  const region = env.region;
  const local = endpoint !== undefined && isLoopback(endpoint);
  const hasCredentials = env.hasAwsCredentials;
  const client = createLedgerClient({
    ...(endpoint ? { endpoint } : {}),
    ...(region ? { region } : local ? { region: "us-east-1" } : {}),
    ...(local && !hasCredentials ? { credentials: { accessKeyId: "dvmlocal", secretAccessKey: "dvmlocal" } } : {}),
  });
  // A command line wants a quick answer: fewer tries than the phase functions make.
  const ledger = new DynamoPhaseLedger({ client, tableName: table, retry: { attempts: 3 } });
  return { ledger, table, endpoint: endpoint ?? `AWS (region ${region ?? "from the AWS config"})` };
}

/** Loads what a command asks for once, and remembers where it pointed for error messages. */
export class CliContext {
  readonly errorContext: ErrorContext = {};
  private host?: HostCluster;
  private ledgerAccess?: LedgerAccess;

  constructor(
    readonly options: GlobalOptions,
    readonly io: CliIo,
  ) {}

  cluster(): HostCluster {
    if (!this.host) {
      const kubeConfig = loadKubeConfig(this.options, this.io);
      const server = kubeConfig.getCurrentCluster()?.server ?? "?";
      this.errorContext.server = server;
      this.host = {
        kubeConfig,
        server,
        namespace: namespaceOf(kubeConfig, this.options),
        store: new KubeDvmStore(kubeConfig),
        cluster: new KubeCluster("host", kubeConfig),
      };
    }
    return this.host;
  }

  ledger(): LedgerAccess {
    if (!this.ledgerAccess) {
      const access = openLedger(this.options, this.io);
      this.errorContext.table = access.table;
      this.errorContext.dynamoEndpoint = access.endpoint;
      this.ledgerAccess = access;
    }
    return this.ledgerAccess;
  }
}
