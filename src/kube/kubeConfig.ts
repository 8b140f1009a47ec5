/**
 * KubeConfig from its own module rather than client-node's index: the index drags every generated API
 * and model class into a bundle, which is most of the phase function's size and cold start.
 */
export { KubeConfig } from "@kubernetes/client-node/dist/config.js";
