import type { paths } from "@cumulo/client";

type Json<T> = T extends { content: { "application/json": infer Body } } ? Body : never;
type Ok<Operation> = Operation extends { responses: { 200: infer Response } } ? Json<Response> : never;
type Created<Operation> = Operation extends { responses: { 201: infer Response } } ? Json<Response> : never;

export type Library = Ok<paths["/v1/media/libraries/{libraryId}"]["get"]>["data"];
export type LibraryCreate = NonNullable<
  paths["/v1/media/libraries"]["post"]["requestBody"]
>["content"]["application/json"];
export type Folder = Created<paths["/v1/media/libraries/{libraryId}/folders"]["post"]>["data"];
export type Video = Ok<paths["/v1/media/libraries/{libraryId}/videos/{videoId}"]["get"]>["data"];
export type Player = Ok<paths["/v1/media/libraries/{libraryId}/players/{playerId}"]["get"]>["data"];
export type Subtitle = Created<
  paths["/v1/media/libraries/{libraryId}/videos/{videoId}/subtitles"]["post"]
>["data"];
export type Security = Ok<paths["/v1/media/libraries/{libraryId}/security"]["get"]>["data"];
