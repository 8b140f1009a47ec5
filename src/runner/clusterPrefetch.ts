/**
 * Reads a DVM's kubeconfig Secrets while the DVM is being read, instead of after. The runner can
 * only know which Secrets a DVM names once it has read the DVM; this remembers, per DVM uid, the
 * references its last context in this process resolved (after the migration policy allowed them), and
 * starts resolving those again at the start of the next invocation. The result is used only when the
 * spec read fresh names exactly the same references and passes the policy again; otherwise it is dropped
 * and the fresh spec is resolved as before. The Secrets are still read on every invocation (a rotated or
 * revoked kubeconfig is never used once the API server has the change): only earlier.
 */
import type { DvmSpec } from "../dvm/types";
import type { ClusterResolver } from "../kube/resolver";
import { definedFields } from "../lib/definedFields";
import { settle, unwrap } from "../lib/settle";

type ClusterRefs = Pick<DvmSpec, "sourceCluster" | "destinationCluster">;

interface Remembered {
  namespace: string;
  refs: ClusterRefs;
}

/** Enough for the DVMs one warm container serves at a time; the least recently used are dropped. */
const DEFAULT_LIMIT = 1_024;

export class ClusterPrefetch {
  /** Map order is use order: the first key is the least recently used. */
  private readonly remembered = new Map<string, Remembered>();

  constructor(
    private readonly inner: ClusterResolver,
    private readonly limit = DEFAULT_LIMIT,
  ) {}

  /**
   * The resolver for one invocation of the DVM `uid` in `namespace`. With `prefetch`, when this process
   * resolved that DVM's references before and they name a Secret, resolving them starts now.
   */
  forInvocation(uid: string, namespace: string, prefetch: boolean): ClusterResolver {
    const known = this.remembered.get(uid);
    const early = prefetch && known && known.namespace === namespace && namesSecret(known.refs) ? settle(this.inner.resolve(namespace, known.refs)) : undefined;
    return {
      resolve: async (dvmNamespace, spec) => {
        const refs = refsOf(spec);
        this.remember(uid, { namespace: dvmNamespace, refs });
        if (early && dvmNamespace === namespace && sameRefs(refs, known!.refs)) {
          return unwrap(await early);
        }
        return this.inner.resolve(dvmNamespace, spec);
      },
    };
  }

  /** Forgets a DVM (deleted, finished): nothing of it is prefetched again. */
  forget(uid: string): void {
    this.remembered.delete(uid);
  }

  private remember(uid: string, entry: Remembered): void {
    this.remembered.delete(uid);
    this.remembered.set(uid, entry);
    for (const oldest of this.remembered.keys()) {
      if (this.remembered.size <= this.limit) break;
      this.remembered.delete(oldest);
    }
  }
}

function refsOf(spec: ClusterRefs): ClusterRefs {
  return definedFields({ sourceCluster: spec.sourceCluster, destinationCluster: spec.destinationCluster });
}

function namesSecret(refs: ClusterRefs): boolean {
  return refs.sourceCluster !== undefined || refs.destinationCluster !== undefined;
}

function sameRefs(a: ClusterRefs, b: ClusterRefs): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

/** Key order fixed, so two equal references compare equal whatever order their fields came in. */
function canonical(refs: ClusterRefs): unknown {
  const one = (ref: ClusterRefs["sourceCluster"]) =>
    ref ? [ref.kubeconfigSecretRef.name, ref.kubeconfigSecretRef.key, ref.kubeconfigSecretRef.namespace ?? null] : null;
  return [one(refs.sourceCluster), one(refs.destinationCluster)];
}
