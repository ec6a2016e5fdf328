/** Where a video's processing may be told to stop (it stays there): the stages after the upload. */
export const VIDEO_STOP_STAGES = ["processing", "transcoding", "packaging"] as const;
/** Where a library's provisioning may be told to stop: before it becomes `active`. */
export const LIBRARY_STOP_STAGES = ["provisioning"] as const;

export type VideoStopStage = (typeof VIDEO_STOP_STAGES)[number];
export type LibraryStopStage = (typeof LIBRARY_STOP_STAGES)[number];

/** `real`: as without developer mode; `instant`: at once, without ffmpeg; `stop_at`: at once up to a stage. */
export type VideoTransition = "real" | "instant" | { stop_at: VideoStopStage };
export type LibraryTransition = "real" | "instant" | { stop_at: LibraryStopStage };

export interface TransitionRules {
  video: VideoTransition;
  library: LibraryTransition;
}

export interface OrganizationTransitions extends Partial<TransitionRules> {
  organization_id: string;
}

/**
 * How videos and libraries move through their statuses in developer mode: a rule for every
 * organization, and rules of single organizations that override it. Kept in this process (developer
 * mode runs one), and kept across a state reset or snapshot load: they describe the test run, not the
 * store.
 */
export class Transitions {
  #everyone: TransitionRules;
  readonly #byOrganization = new Map<string, Partial<TransitionRules>>();

  constructor(initial: TransitionRules = { video: "real", library: "real" }) {
    this.#everyone = { ...initial };
  }

  /** Changes the given rules, of one organization or (without one) of every organization. */
  set(organizationId: string | undefined, change: Partial<TransitionRules>): void {
    const given = Object.fromEntries(Object.entries(change).filter(([, value]) => value !== undefined));
    if (organizationId === undefined) {
      this.#everyone = { ...this.#everyone, ...given };
      return;
    }
    this.#byOrganization.set(organizationId, { ...this.#byOrganization.get(organizationId), ...given });
  }

  /** Drops one organization's rules, or (without one) every rule: all back to `real`. */
  clear(organizationId?: string): void {
    if (organizationId !== undefined) {
      this.#byOrganization.delete(organizationId);
      return;
    }
    this.#byOrganization.clear();
    this.#everyone = { video: "real", library: "real" };
  }

  /** Whether this organization has rules of its own. */
  has(organizationId: string): boolean {
    return this.#byOrganization.has(organizationId);
  }

  /** The rules that apply to this organization. */
  of(organizationId: string): TransitionRules {
    return { ...this.#everyone, ...this.#byOrganization.get(organizationId) };
  }

  view(): { default: TransitionRules; organizations: OrganizationTransitions[] } {
    return {
      default: { ...this.#everyone },
      organizations: [...this.#byOrganization].map(([organization_id, rules]) => ({
        organization_id,
        ...rules,
      })),
    };
  }
}
