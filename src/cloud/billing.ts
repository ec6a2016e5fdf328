import type { AuthContext, IdentityService } from "../identity/service.ts";
import { type Invalid, invalid } from "./outcome.ts";

export type BillingOutcome = { outcome: "found"; billingAccountId: number } | Invalid;

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
      if (!(await this.identity.ownsBillingAccount(auth.organizationId, given))) {
        return invalid(field, `The ${field} field must name a billing account of your organization.`);
      }
      return { outcome: "found", billingAccountId: given };
    }
    if (auth.billingAccountId !== null) return { outcome: "found", billingAccountId: auth.billingAccountId };
    const fallback = await this.identity.defaultBillingAccountId(auth.organizationId);
    if (fallback === undefined) throw new Error(`organization ${auth.organizationId} has no billing account`);
    return { outcome: "found", billingAccountId: fallback };
  }

  /** The organization's accounts, all active (Cumulo has no inactive accounts). */
  async list(auth: AuthContext) {
    const accounts = await this.identity.listBillingAccounts(auth.organizationId);
    return accounts.map((account) => ({ ...account, is_active: true }));
  }
}
