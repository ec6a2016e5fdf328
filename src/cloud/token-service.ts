import { cloudDateTime } from "../http/time.ts";
import type { AuthContext, CloudTokenRecord, IdentityService } from "../identity/service.ts";
import { type BillingAccounts, notOwned } from "./billing.ts";
import { DELETED, type Deleted, type Forbidden, type Invalid, type NotFound, notFound } from "./outcome.ts";
import { type CreatedTokenView, MAX_ROW_ID, type TokenView } from "./schemas.ts";

export type CreateTokenOutcome = { outcome: "created"; token: CreatedTokenView } | Forbidden | Invalid;
export type UpdateTokenOutcome = { outcome: "updated"; token: TokenView } | Forbidden | Invalid | NotFound;
/** `missing_id`: the id may come from the body or the query, and came from neither. */
export type DeleteTokenOutcome = Deleted | Forbidden | NotFound | { outcome: "missing_id" };

/** An id outside the store's range names no token, and must not reach a query. */
const namesNoToken = (id: number): boolean => id < 1 || id > MAX_ROW_ID;

export const RESTRICTED: Forbidden = {
  outcome: "forbidden",
  message: "A restricted token cannot manage tokens",
};

function tokenView(record: CloudTokenRecord): TokenView {
  return {
    id: record.id,
    billing_account_id: record.billing_account_id,
    user_id: record.user_id,
    consumer_id: record.consumer_id,
    description: record.description,
    restricted: record.restricted,
    created_at: cloudDateTime(record.created_at),
    updated_at: cloudDateTime(record.updated_at),
  };
}

/** Cloud API tokens (identity keys of kind `cloud_token`); restricted tokens may only list them. */
export class TokenService {
  constructor(
    private readonly identity: IdentityService,
    private readonly billing: BillingAccounts,
  ) {}

  async create(
    auth: AuthContext,
    input: { billingAccountId: number | undefined; description: string; restricted: boolean },
  ): Promise<CreateTokenOutcome> {
    if (auth.restricted) return RESTRICTED;
    // A given account is not read first: the insert checks that it is the organization's
    // (docs/performance.md, session 25).
    const created = await this.identity.createCloudToken(auth, {
      billingAccountId: input.billingAccountId ?? (await this.billing.keysOrDefault(auth)),
      description: input.description,
      restricted: input.restricted,
    });
    if (!created) return notOwned("billing_account_id");
    return { outcome: "created", token: { ...tokenView(created.record), token: created.token } };
  }

  async list(auth: AuthContext): Promise<TokenView[]> {
    return (await this.identity.listCloudTokens(auth.organizationId)).map((record) => tokenView(record));
  }

  async update(
    auth: AuthContext,
    id: number,
    changes: { description?: string; restricted?: boolean; billingAccountId?: number },
  ): Promise<UpdateTokenOutcome> {
    if (auth.restricted) return RESTRICTED;
    if (changes.billingAccountId !== undefined) {
      const billing = await this.billing.resolve(auth, changes.billingAccountId);
      if (billing.outcome !== "found") return billing;
    }
    if (namesNoToken(id)) return notFound("Token");
    const result = await this.identity.updateCloudToken(auth.organizationId, id, changes);
    switch (result.outcome) {
      case "updated":
        return { outcome: "updated", token: tokenView(result.token) };
      case "not_found":
        return notFound("Token");
    }
  }

  async delete(auth: AuthContext, id: number | undefined): Promise<DeleteTokenOutcome> {
    if (auth.restricted) return RESTRICTED;
    if (id === undefined) return { outcome: "missing_id" };
    if (namesNoToken(id)) return notFound("Token");
    const result = await this.identity.deleteCloudToken(auth.organizationId, id);
    switch (result.outcome) {
      case "revoked":
        return DELETED;
      case "not_found":
        return notFound("Token");
    }
  }
}
