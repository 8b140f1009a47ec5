export { executionsOf } from "./executions";
export { renderTimelineSvg, tickStep } from "./svg";
export { buildTimingReport, guessItinerary, roundShares, type TimingReport } from "./timing";
export { formatBytes, formatRate, formatTimeLeft } from "./units";
export { checkWellFormedXml, countElementsWithClass } from "./wellFormed";
