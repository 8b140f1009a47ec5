/** The chaos harness: environments, scenarios, the baseline and reports, for test/chaos and bench/. */

export { BaselineController } from "./baseline";
export { type DynamoCounts, instrumentDynamo } from "./dynamoFaults";
export { type ChaosEnvironment, type EnvironmentOptions, startEnvironment } from "./environment";
export { createMigrations, mapLimit, prepareMigrations } from "./fixture";
export { Observatory, positionRank } from "./observatory";
export { comparisonTable, describeReport } from "./report";
export {
  compareScenario,
  FAULT_DESCRIPTIONS,
  type Fault,
  needsOwnHost,
  runScenario,
  SCENARIOS,
  type Scenario,
  type ScenarioReport,
  scenarioNamed,
  type TargetReport,
} from "./scenarios";
export { distribution, summarizeRepeats, Tally, transitionOverhead } from "./tally";
