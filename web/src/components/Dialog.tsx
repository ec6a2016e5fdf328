import { type ReactNode, useEffect, useId, useRef, useState } from "react";
import { useOneAtATime } from "../form.ts";
import { WrapPoints } from "./WrapPoints.tsx";

interface DialogProps {
  open: boolean;
  title: string;
  onClose: () => void;
  children: ReactNode;
  /**
   * Escape closes the dialog (the default). Where closing loses something for good (a secret shown
   * once), Escape instead moves the focus to the dialog's primary button, which closes it.
   */
  closesOnEscape?: boolean;
}

/** A modal on the native <dialog>: focus is trapped, Escape closes, focus returns to the opener. */
export function Dialog({ open, title, onClose, children, closesOnEscape = true }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return (
    <dialog
      ref={ref}
      aria-labelledby={titleId}
      onClose={() => {
        // The close event comes a task after the dialog closed: if the person reopened it meanwhile
        // (Escape, then Enter on the opener at once), that late event must not close it again.
        if (!ref.current?.open) onClose();
      }}
      onKeyDown={(event) => {
        // Kept from the keydown itself: Chromium closes a dialog on a second Escape even when its
        // cancel event is refused.
        if (closesOnEscape || event.key !== "Escape") return;
        event.preventDefault();
        ref.current?.querySelector<HTMLButtonElement>(".dialog-actions button.primary")?.focus();
      }}
      onCancel={(event) => {
        event.preventDefault();
        if (closesOnEscape) onClose();
      }}
    >
      {open && (
        <>
          <h2 id={titleId}>
            {/* Titles name host names: "Edit cdn.example.com". */}
            <WrapPoints text={title} />
          </h2>
          {children}
        </>
      )}
    </dialog>
  );
}

interface ConfirmDialogProps {
  open: boolean;
  title: string;
  children: ReactNode;
  confirmLabel: string;
  onConfirm: () => Promise<void> | void;
  onClose: () => void;
}

/** Asks before a destructive action; shows the action's error in place. */
export function ConfirmDialog({
  open,
  title,
  children,
  confirmLabel,
  onConfirm,
  onClose,
}: ConfirmDialogProps) {
  const [error, setError] = useState<string>();
  useEffect(() => {
    if (open) setError(undefined);
  }, [open]);
  // Not disabled while it runs: a disabled button drops the focus to the page, where it stayed when
  // the action was refused (a disk still attached); a second press meanwhile does nothing.
  const confirming = useOneAtATime(async () => {
    try {
      await onConfirm();
      onClose();
    } catch (caught) {
      setError(caught instanceof Error ? caught.message : "Failed");
    }
  });
  return (
    <Dialog open={open} title={title} onClose={onClose}>
      <div className="dialog-body">{children}</div>
      {error && (
        <p className="field-error" role="alert">
          {error}
        </p>
      )}
      <div className="dialog-actions">
        <button type="button" onClick={onClose}>
          Cancel
        </button>
        <button
          type="button"
          className="danger"
          aria-busy={confirming.busy}
          onClick={() => void confirming.run()}
        >
          {confirmLabel}
        </button>
      </div>
    </Dialog>
  );
}

export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [copied, setCopied] = useState<"yes" | "failed">();
  return (
    <button
      type="button"
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
          setCopied("yes");
        } catch {
          // No clipboard access (permission refused, page not focused): the text stays selectable.
          setCopied("failed");
        }
      }}
    >
      {copied === "yes" ? "Copied" : copied === "failed" ? "Copy failed: select the text" : label}
      <span className="visually-hidden" aria-live="polite">
        {copied === "yes" ? " to the clipboard" : ""}
      </span>
    </button>
  );
}

interface SecretDialogProps {
  open: boolean;
  title: string;
  /** What the secret is, e.g. "API key". */
  label: string;
  secret: string;
  /** What the page says about seeing the secret again; by default, that it is shown only this once. */
  note?: string;
  onClose: () => void;
}

/** A new secret with a copy button and a plain note (by default: the API returns it only once). */
export function SecretDialog({ open, title, label, secret, note, onClose }: SecretDialogProps) {
  const id = useId();
  return (
    <Dialog open={open} title={title} onClose={onClose} closesOnEscape={note !== undefined}>
      {note ? (
        <p>{note}</p>
      ) : (
        <p className="warning">Copy it now: it is shown only this once and cannot be shown again.</p>
      )}
      <label htmlFor={id}>{label}</label>
      <div className="secret-row">
        {/* A text area, wrapped: a one-line field showed only part of a long secret. */}
        <textarea
          id={id}
          readOnly
          rows={2}
          spellCheck={false}
          value={secret}
          className="secret"
          onFocus={(event) => event.target.select()}
        />
        <CopyButton text={secret} />
      </div>
      <div className="dialog-actions">
        <button type="button" className="primary" onClick={onClose}>
          {note ? "Done" : "I have copied it"}
        </button>
      </div>
    </Dialog>
  );
}
