/**
 * `osls package`, offline, into a private copy of the service folder: osls writes .serverless and
 * .esbuild next to serverless.yml, which would collide with other packagings running at the same time.
 */
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
export const ROOT = join(import.meta.dirname, "..", "..");
const SKIPPED = [".git", ".serverless", ".esbuild", ".serverless-offline", ".dvm"];

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML/JSON, walked freely by the test
type Json = Record<string, any>;

export interface PackageOptions {
  stage: string;
  /** Scratch folder: the service copy goes to <scratch>/service-<name>, the package to <scratch>/<name>. */
  scratch: string;
  name: string;
  params?: string[];
  timeoutMs?: number;
}

export interface PackagedService {
  dir: string;
  template: Json;
  resources: Json;
  zip: Buffer;
}

/**
 * A private service folder, <scratch>/service-<name>: a copy of serverless.yml (osls wants a real file)
 * and symlinks to the repository's other top-level entries, so osls's .serverless and .esbuild land there.
 */
export function serviceCopy(scratch: string, name: string): string {
  const service = join(scratch, `service-${name}`);
  mkdirSync(service);
  for (const entry of readdirSync(ROOT)) {
    if (SKIPPED.includes(entry)) continue;
    if (entry === "serverless.yml") copyFileSync(join(ROOT, entry), join(service, entry));
    else symlinkSync(join(ROOT, entry), join(service, entry));
  }
  return service;
}

export async function packageService(options: PackageOptions): Promise<PackagedService> {
  const service = serviceCopy(options.scratch, options.name);
  const dir = join(options.scratch, options.name);
  try {
    await run(join(ROOT, "node_modules", ".bin", "osls"), ["package", "--stage", options.stage, "--package", dir, ...(options.params ?? [])], {
      cwd: service,
      timeout: options.timeoutMs ?? 240_000,
      maxBuffer: 16 << 20,
      // Dummy credentials: packaging talks to no AWS service.
      env: {
        ...process.env,
        AWS_ACCESS_KEY_ID: "test",
        AWS_SECRET_ACCESS_KEY: "test",
        AWS_SESSION_TOKEN: "",
        AWS_PROFILE: "",
        AWS_REGION: "us-east-1",
        DVM_ESBUILD_WORK_FOLDER: "",
      },
    });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`osls package --stage ${options.stage} (${options.name}) failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
  }
  const template = JSON.parse(readFileSync(join(dir, "cloudformation-template-update-stack.json"), "utf8")) as Json;
  const zipName = readdirSync(dir).find((f) => f.endsWith(".zip"));
  return { dir, template, resources: template.Resources as Json, zip: zipName ? readFileSync(join(dir, zipName)) : Buffer.alloc(0) };
}
