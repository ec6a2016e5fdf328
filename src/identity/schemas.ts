import { Type } from "@sinclair/typebox";
import { NonBlankString, Timestamp, Uuid } from "../http/schemas.ts";
import { API_KEY_NAME_MAX } from "./keys.ts";
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "./passwords.ts";

/** A console session as the console sees it; `csrf_token` goes in `X-CSRF-Token` on every write (a GET that creates included). */
export const ConsoleSession = Type.Object({
  user: Type.Object({
    id: Type.Integer(),
    uuid: Uuid,
    email: Type.String(),
    read_only: Type.Boolean(),
  }),
  organization: Type.Object({ id: Uuid, name: Type.String() }),
  csrf_token: Type.String({
    description:
      "Send as the X-CSRF-Token header: needed on every unsafe request and on the GETs that create what they answer",
  }),
});

const Password = Type.String({ minLength: PASSWORD_MIN_LENGTH, maxLength: PASSWORD_MAX_LENGTH });

export const SignInBody = Type.Object({
  email: Type.String({ minLength: 1, maxLength: 254 }),
  // Not bounded below: a wrong password of any length is the same 401.
  password: Type.String({ minLength: 1, maxLength: PASSWORD_MAX_LENGTH }),
});

export const ChangePasswordBody = Type.Object({
  current_password: Type.String({ minLength: 1, maxLength: PASSWORD_MAX_LENGTH }),
  new_password: Password,
});

export const AcceptInvitationBody = Type.Object({
  token: Type.String({
    minLength: 1,
    maxLength: 200,
    description: "The part of the invitation link after #",
  }),
  password: Password,
});

export const OrganizationApiKey = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  prefix: Type.String({ description: "The first characters of the key, to recognise it" }),
  read_only: Type.Boolean(),
  created_at: Timestamp,
  last_used_at: Type.Union([Timestamp, Type.Null()], {
    description: "When a request last presented the key, to the minute",
  }),
});

export const CreatedOrganizationApiKey = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  prefix: Type.String(),
  read_only: Type.Boolean(),
  created_at: Timestamp,
  api_key: Type.String({ description: "The secret, shown in this answer only" }),
});

export const CreateApiKeyBody = Type.Object({
  name: NonBlankString(API_KEY_NAME_MAX),
  read_only: Type.Optional(Type.Boolean({ default: false })),
});

export const ApiKeyParams = Type.Object({ keyId: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) });
