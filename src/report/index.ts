export { type EntryExecutions, type ExecutionEnd, entryEnd, executionsOf, type PhaseExecution, repeatedByCounters } from "./executions";
export { escapeXml, renderTimelineSvg, TIMELINE_COLOURS, type TimelineOptions, tickStep } from "./svg";
export { buildTimingReport, guessItinerary, roundShares, type TimingReport, type TimingReportInput, type TimingRow } from "./timing";
export { checkWellFormedXml, countElementsWithClass, type WellFormedResult } from "./wellFormed";
