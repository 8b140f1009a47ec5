export { renderTimelineSvg } from "./svg";
export { buildTimingReport, type TimingReport } from "./timing";
export { formatBytes, formatRate, formatTimeLeft } from "./units";
