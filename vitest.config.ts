import { defineConfig } from "vitest/config";

// Projects: unit tests of pure logic (no services); integration and chaos tests against real parts
// (DynamoDB Local, kube-apiserver + etcd + kwok, rsync, stunnel), which the global setups start once per run
// unless the environment points at existing ones (AWS_ENDPOINT_URL*, KUBECONFIG); and nodes, whole
// migrations on real pods (node mode, infra/dev/local/nodes); and deployed, the stack deployed with osls to moto's AWS
// API emulator, its phase artifact driving a migration on the same node clusters.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          globalSetup: ["test/setup/dynamo.ts", "test/setup/clusters.ts"],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // The suites share two control planes and one DynamoDB; run files one after another.
          fileParallelism: false,
        },
      },
      {
        test: {
          // Real pods moving real bytes: two clusters with a real kubelet, containerd and runc each.
          name: "nodes",
          include: ["test/nodes/**/*.test.ts"],
          globalSetup: ["test/setup/dynamo.ts", "test/setup/nodes.ts"],
          testTimeout: 600_000,
          hookTimeout: 900_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // The stack as osls deploys it, against moto's AWS API emulator (docs/operations.md, "Dry run").
          name: "deployed",
          include: ["test/deployed/**/*.test.ts"],
          // moto, and for the migration on real pods the node clusters (the nodes project's, when both run).
          globalSetup: ["test/setup/moto.ts", "test/setup/deployedNodes.ts"],
          testTimeout: 300_000,
          hookTimeout: 600_000,
          // One moto for the run, whose IAM enforcement is server-wide: files one after another.
          fileParallelism: false,
        },
      },
      {
        test: {
          name: "chaos",
          include: ["test/chaos/**/*.test.ts"],
          globalSetup: ["test/setup/dynamo.ts", "test/setup/clusters.ts"],
          testTimeout: 300_000,
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
