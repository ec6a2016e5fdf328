// Runs s3rver in its own process: `node --openssl-legacy-provider s3-server.mjs DIR BUCKET`.
// s3rver encrypts ListObjectsV2 continuation tokens with DES, which Node's OpenSSL 3 offers only
// with its legacy provider; without it every listing longer than one page fails.
import S3rver from "s3rver";

const [directory, bucket] = process.argv.slice(2);
const server = new S3rver({
  address: "127.0.0.1",
  port: 0,
  directory,
  silent: true,
  configureBuckets: [{ name: bucket }],
});
const { port } = await server.run();
process.stdout.write(`listening ${port}\n`);
process.on("SIGTERM", () => {
  server.close().then(() => process.exit(0));
});
