import { type AuthContext, type IdentityService, OrganizationGoneError } from "../identity/service.ts";
import { type Invalid, invalid } from "./outcome.ts";

export type BillingOutcome = { outcome: "found"; billingAccountId: number } | Invalid;

/** The answer when `field` names a billing account that is not the organization's. */
export const notOwned = (field: string): Invalid =>
  invalid(field, `The ${field} field must name a billing account of your organization.`);

/** Which billing account a cloud resource or token is charged to. */
export class BillingAccounts {
  constructor(private readonly identity: IdentityService) {}

  /**
   * The given account when it is the organization's (else invalid on `field`); when none is given,
   * the key's account, else the organization's default.
   */
  async resolve(
    auth: AuthContext,
    given: number | undefined,
    field = "billing_account_id",
  ): Promise<BillingOutcome> {
    if (given !== undefined) {
      if (!(await this.identity.ownsBillingAccount(auth.organizationId, given))) return notOwned(field);
      return { outcome: "found", billingAccountId: given };
    }
    return { outcome: "found", billingAccountId: await this.keysOrDefault(auth) };
  }

  /** The key's account, else the organization's default. */
  async keysOrDefault(auth: AuthContext): Promise<number> {
    if (auth.billingAccountId !== null) return auth.billingAccountId;
    const fallback = await this.identity.defaultBillingAccountId(auth.organizationId);
    // Every organization has its default account from its creation to its removal.
    if (fallback === undefined) throw new OrganizationGoneError(auth.organizationId);
    return fallback;
  }

  /** The organization's accounts, all active (Cumulo has no inactive accounts). */
  async list(auth: AuthContext) {
    const accounts = await this.identity.listBillingAccounts(auth.organizationId);
    return accounts.map((account) => ({ ...account, is_active: true }));
  }
}
