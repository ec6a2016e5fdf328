import type { FastifyPluginAsync, FastifyReply } from "fastify";

/** S3's own error body: the shape every S3 SDK reads its `Code` and `Message` from. */
const NOT_SERVED = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>NotImplemented</Code><Message>Cumulo issues object-storage keys but does not serve the S3 API: this is the address where the operator's S3 gateway is expected (docs/cloud.md, Object storage)</Message><Resource>/s3</Resource></Error>
`;

/**
 * `/s3` and everything under it, the address `GET /storage/api/s3` names. An S3 client pointed there
 * got the media API's JSON 404, which S3 SDKs report only as an unknown error (QA of session 48);
 * now it gets S3's own 501 `NotImplemented` saying why. Answered before any body is read: an
 * object being put is not taken in only to be refused.
 */
export const s3EndpointRoutes: FastifyPluginAsync = async (app) => {
  const answer = async (_request: unknown, reply: FastifyReply) =>
    reply.code(501).header("content-type", "application/xml").send(NOT_SERVED);
  for (const url of ["/s3", "/s3/*"]) {
    app.route({
      method: ["GET", "PUT", "POST", "DELETE"],
      url,
      schema: { hide: true },
      onRequest: answer,
      handler: answer,
    });
  }
};
