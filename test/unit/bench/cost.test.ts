/** The cost arithmetic (pure): the architecture and memory come from serverless.yml, DynamoDB from consumed units. */
import { describe, expect, it } from "vitest";
import { costPerThousand, PRICES, phaseFunctionArchitecture, phaseFunctionMemoryMb } from "../../../bench/cost";

describe("cost per 1,000 migrations", () => {
  it("prices Lambda compute for the architecture serverless.yml deploys", () => {
    expect(phaseFunctionArchitecture()).toBe("arm64");
    expect(phaseFunctionMemoryMb()).toBeGreaterThan(0);
  });

  it("bills DynamoDB by the capacity units consumed, not by the number of requests", () => {
    const measured = {
      invocations: 10,
      waitingInvocations: 2,
      invocationMs: 2_000,
      dynamoRequests: { UpdateItemCommand: 20 },
      dynamoCapacityUnits: { write: 50, read: 4 },
    };
    const estimate = costPerThousand(measured, 1024, "arm64");
    const dynamo = (1000 * 50 * PRICES.dynamoPerMillionWriteUnits + 1000 * 4 * PRICES.dynamoPerMillionReadUnits) / 1e6;
    expect(estimate.perThousand.dynamo).toBeCloseTo(dynamo, 10);
    const lambda = (1000 * 10 * PRICES.lambdaPerMillionRequests) / 1e6 + 1000 * 2 * PRICES.lambdaPerGbSecond.arm64;
    expect(estimate.perThousand.lambda).toBeCloseTo(lambda, 10);
    expect(costPerThousand(measured, 1024, "x86_64").perThousand.lambda).toBeGreaterThan(lambda);
    expect(estimate.lines.join("\n")).toContain("Lambda compute (arm64)");
  });
});
