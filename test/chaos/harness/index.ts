/** The chaos harness: environments, scenarios, the baseline and reports, for test/chaos and bench/. */

export { type ChaosEnvironment, startEnvironment } from "./environment";
export { createMigrations, prepareMigrations } from "./fixture";
export { Observatory } from "./observatory";
export { comparisonTable, describeReport } from "./report";
export {
  compareScenario,
  FAULT_DESCRIPTIONS,
  runScenario,
  SCENARIOS,
  type ScenarioReport,
  scenarioNamed,
  type TargetReport,
} from "./scenarios";
export { distribution } from "./tally";
