import { useState } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { api, call, isMissing } from "../../api.ts";
import { PageHeader } from "../../components/Layout.tsx";
import { ErrorState, Loading, Missing } from "../../components/States.tsx";
import { useLoad } from "../../load.ts";
import { FolderTree } from "./FolderTree.tsx";
import { SecurityForm } from "./SecurityForm.tsx";
import { UnfinishedUploads } from "./UnfinishedUploads.tsx";
import { UploadForm } from "./UploadForm.tsx";
import { VideoList } from "./VideoList.tsx";

/** One library: its folders, its videos, uploading, and its security settings; the folder chosen is `?folder=`. */
export function LibraryPage() {
  const { libraryId = "" } = useParams();
  const navigate = useNavigate();
  const [params, setParams] = useSearchParams();
  const folderId = params.get("folder");
  const setFolderId = (folder: string | null) => setParams(folder ? { folder } : {});
  const [videosRound, setVideosRound] = useState(0);
  const library = useLoad(
    () => call(api.GET("/v1/media/libraries/{libraryId}", { params: { path: { libraryId } } })),
    libraryId,
  );
  if (library.state === "loading") return <Loading what="Loading the library" />;
  if (library.state === "error" && isMissing(library.error)) {
    return (
      <Missing title="Library not found">
        None of your libraries has this address; it may have been deleted.{" "}
        <Link to="/libraries">Go to your libraries</Link>.
      </Missing>
    );
  }
  if (library.state === "error") return <ErrorState error={library.error} onRetry={library.reload} />;
  const { data } = library.data;
  return (
    <>
      <nav aria-label="Breadcrumb" className="breadcrumb">
        <Link to="/libraries">Libraries</Link> / <span aria-current="page">{data.name}</span>
      </nav>
      <PageHeader title={data.name}>
        <Link className="button" to={`/players?library=${data.id}`}>
          Players
        </Link>
      </PageHeader>
      {data.description && <p>{data.description}</p>}
      <div className="library-layout">
        <section className="panel" aria-labelledby="folders-title">
          <h2 id="folders-title">Folders</h2>
          <FolderTree libraryId={data.id} selected={folderId} onSelect={setFolderId} />
        </section>
        <div>
          <UnfinishedUploads
            key={data.id}
            libraryId={data.id}
            onUploaded={(videoId) => navigate(`/libraries/${data.id}/videos/${videoId}`)}
          />
          <section className="panel" aria-labelledby="upload-title">
            <h2 id="upload-title">Upload a video</h2>
            <UploadForm
              key={data.id}
              libraryId={data.id}
              folderId={folderId}
              onUploaded={() => setVideosRound((n) => n + 1)}
            />
          </section>
          <section className="panel" aria-labelledby="videos-title">
            <h2 id="videos-title">Videos</h2>
            <VideoList libraryId={data.id} folderId={folderId} round={videosRound} />
          </section>
        </div>
      </div>
      <section className="panel" aria-labelledby="security-title">
        <h2 id="security-title">Security</h2>
        {/* The videos' thumbnails follow the privacy saved (a private library's need a token). */}
        <SecurityForm libraryId={data.id} onSaved={() => setVideosRound((n) => n + 1)} />
      </section>
    </>
  );
}
