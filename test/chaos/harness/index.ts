/** The chaos harness: environments, scenarios, the baseline and reports, for test/chaos and bench/. */
export { startEnvironment, type ChaosEnvironment, type EnvironmentOptions } from "./environment";
export { Observatory, positionRank } from "./observatory";
export { runScenario, compareScenario, scenarioNamed, needsOwnHost, SCENARIOS, FAULT_DESCRIPTIONS, type Fault, type Scenario, type ScenarioReport, type TargetReport } from "./scenarios";
export { comparisonTable, describeReport } from "./report";
export { BaselineController } from "./baseline";
export { instrumentDynamo, type DynamoCounts } from "./dynamoFaults";
export { prepareMigrations, createMigrations, mapLimit } from "./fixture";
export { summarizeRepeats, Tally, distribution, transitionOverhead } from "./tally";
