/**
 * Amazon SQS through its JSON protocol, signed with SigV4: the AWS SDK's SQS client is not among the
 * project's packages, and these tests need four calls. Signing matters: with moto's IAM enforcement on,
 * an unsigned or wrongly signed request is refused before any policy is read.
 */
import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";
import { SignatureV4 } from "@smithy/signature-v4";
import { definedFields } from "../../src/lib/definedFields";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

type SourceData = string | ArrayBuffer | ArrayBufferView;

function bytes(data: SourceData): string | Uint8Array {
  if (typeof data === "string") return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** The hash constructor SigV4 wants, from node:crypto (HMAC when given a key). */
class NodeSha256 {
  private readonly hash: Hash | Hmac;
  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", bytes(secret));
  }
  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
}

/** An SQS error as AWS names it: `name` is the code (AccessDenied, QueueDoesNotExist...). */
export class SqsError extends Error {
  constructor(
    override readonly name: string,
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

export class SqsJsonClient {
  private readonly signer: SignatureV4;
  private readonly url: URL;

  constructor(options: { endpoint: string; region: string; credentials: AwsCredentials }) {
    this.url = new URL(options.endpoint);
    this.signer = new SignatureV4({ service: "sqs", region: options.region, credentials: options.credentials, sha256: NodeSha256 });
  }

  async call<T = Record<string, unknown>>(operation: string, input: Record<string, unknown>): Promise<T> {
    const body = JSON.stringify(input);
    const signed = await this.signer.sign({
      method: "POST",
      protocol: this.url.protocol,
      hostname: this.url.hostname,
      ...definedFields({ port: Number(this.url.port) || undefined }),
      path: "/",
      query: {},
      headers: { host: this.url.host, "content-type": "application/x-amz-json-1.0", "x-amz-target": `AmazonSQS.${operation}` },
      body,
    });
    const res = await fetch(new URL("/", this.url), { method: "POST", headers: signed.headers, body });
    const text = await res.text();
    if (res.ok) return (text ? JSON.parse(text) : {}) as T;
    throw parseError(text, res.status, operation);
  }
}

/** JSON ({"__type", "message"}) as AWS answers, or the query protocol's XML (moto's IAM refusals). */
function parseError(text: string, status: number, operation: string): SqsError {
  try {
    const json = JSON.parse(text) as { __type?: string; message?: string; Message?: string };
    return new SqsError((json.__type ?? "SqsError").split("#").pop()!, json.message ?? json.Message ?? text, status);
  } catch {
    const code = /<Code>([^<]*)<\/Code>/.exec(text)?.[1] ?? `HTTP ${status}`;
    const message = /<Message>([^<]*)<\/Message>/.exec(text)?.[1] ?? `${operation} failed`;
    return new SqsError(code, message, status);
  }
}
