/** The in-memory ledger keeps the PhaseLedger contract the DynamoDB ledger keeps (test/support/ledgerContract.ts). */
import { describe } from "vitest";
import { ledgerContract } from "../../support/ledgerContract";
import { MemoryLedger } from "../../support/memoryLedger";

describe("MemoryLedger", () => {
  const shared = new MemoryLedger();
  ledgerContract((now) => new MemoryLedger(now, shared.entries), Date.now());
});
