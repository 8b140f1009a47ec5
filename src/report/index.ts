export { entryEnd, executionsOf, repeatedByCounters, type EntryExecutions, type ExecutionEnd, type PhaseExecution } from "./executions";
export { buildTimingReport, guessItinerary, roundShares, type TimingReport, type TimingReportInput, type TimingRow } from "./timing";
export { escapeXml, renderTimelineSvg, tickStep, TIMELINE_COLOURS, type TimelineOptions } from "./svg";
export { checkWellFormedXml, countElementsWithClass, type WellFormedResult } from "./wellFormed";
