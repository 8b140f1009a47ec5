/**
 * The trigger's EventBridge rule, from the same allow-list the function checks (triggerAllowedSources,
 * read by src/events/sources.ts), so the rule and the function never disagree:
 *
 *   name:    ${file(./infra/deploy/serverless/trigger.cjs):ruleName}
 *   pattern: ${file(./infra/deploy/serverless/trigger.cjs):eventPattern}
 *   enabled: ${file(./infra/deploy/serverless/trigger.cjs):ruleEnabled}
 *   ... ${file(./infra/deploy/serverless/trigger.cjs):ruleArn}   (the failure queue's policy names the rule)
 *
 * The rule matches the request type and an allowed source, either EventBridge's own `source` (plain
 * events) or the wrapped CloudEvent's `detail.source`; the function then checks the CloudEvent's source
 * again. An empty list disables the rule: no event reaches the function that would refuse them all.
 */
"use strict";

const path = require("node:path");
const { require: tsxRequire } = require("tsx/cjs/api");

const load = (file) => tsxRequire(path.join(__dirname, "../../../src", file), __filename);
const { parseSourceAllowList, eventBridgeSourceMatch } = load("events/sources.ts");
const { MIGRATION_REQUESTED } = load("events/schema.ts");

async function sourceMatch(resolveVariable) {
  const text = await resolveVariable("param:triggerAllowedSources");
  return eventBridgeSourceMatch(parseSourceAllowList(typeof text === "string" ? text : ""));
}

async function nameOfRule(resolveConfigurationProperty, resolveVariable) {
  return `${await resolveConfigurationProperty(["service"])}-${await resolveVariable("sls:stage")}-migration-requests`;
}

module.exports = {
  async ruleName({ resolveConfigurationProperty, resolveVariable }) {
    return nameOfRule(resolveConfigurationProperty, resolveVariable);
  },

  /** By name (osls's logical id of a rule depends on the event's index): rule/<name>, or rule/<bus>/<name>. */
  async ruleArn({ resolveConfigurationProperty, resolveVariable }) {
    const name = await nameOfRule(resolveConfigurationProperty, resolveVariable);
    const bus = await resolveConfigurationProperty(["custom", "events", "busName"]);
    const path = bus && bus !== "default" ? `rule/${bus}/${name}` : `rule/${name}`;
    return { "Fn::Join": ["", ["arn:", { Ref: "AWS::Partition" }, ":events:", { Ref: "AWS::Region" }, ":", { Ref: "AWS::AccountId" }, `:${path}`]] };
  },

  async eventPattern({ resolveVariable }) {
    const match = await sourceMatch(resolveVariable);
    const pattern = { "detail-type": [MIGRATION_REQUESTED] };
    if (match === "any" || match === "none") return pattern;
    return { ...pattern, $or: [{ source: match }, { detail: { source: match } }] };
  },

  async ruleEnabled({ resolveVariable }) {
    return (await sourceMatch(resolveVariable)) !== "none";
  },
};
