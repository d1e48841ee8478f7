import { useRef } from 'preact/hooks';
import type { ApiError } from './api.js';
import { errorText } from './ui.js';

/** `(line 3, column 7)` in an `invalid_transformation` or `invalid_function` message: where the editor's cursor should go. */
export function codePosition(message: string): { line: number; column: number } | undefined {
  const at = /\(line (\d+), column (\d+)\)/.exec(message);
  return at === null ? undefined : { line: Number(at[1]), column: Number(at[2]) };
}

/** The offset in `text` of a 1-based line and column, clamped to the text. */
function offsetOf(text: string, line: number, column: number): number {
  const lines = text.split('\n');
  let offset = 0;
  for (let i = 0; i < Math.min(line - 1, lines.length - 1); i++) offset += lines[i]!.length + 1;
  const current = lines[Math.min(line - 1, lines.length - 1)] ?? '';
  return offset + Math.min(Math.max(column - 1, 0), current.length);
}

/**
 * The code text area of the transformation and function editors, with the
 * API's refusal of the code beside it (`#code-error`) and, when the message
 * names a line and column, a button that puts the cursor there.
 */
export function CodeEditor({ code, onInput, error }: { code: string; onInput: (code: string) => void; error: ApiError | undefined }) {
  const editor = useRef<HTMLTextAreaElement>(null);
  const position = error === undefined ? undefined : codePosition(error.message);
  const goToError = (): void => {
    const area = editor.current;
    if (area === null || position === undefined) return;
    const offset = offsetOf(area.value, position.line, position.column);
    area.focus();
    area.setSelectionRange(offset, offset);
  };
  return (
    <div class="editor">
      <label class="editor-code">
        Code
        <textarea
          ref={editor}
          class="code"
          rows={16}
          spellcheck={false}
          value={code}
          onInput={(event) => onInput((event.target as HTMLTextAreaElement).value)}
          aria-invalid={error !== undefined}
          aria-describedby={error === undefined ? undefined : 'code-error'}
        />
      </label>
      {error !== undefined && (
        <div class="editor-error" id="code-error" role="alert">
          <p class="error">{errorText(error)}</p>
          {position !== undefined && (
            <button type="button" class="secondary" onClick={goToError}>
              Go to line {position.line}, column {position.column}
            </button>
          )}
        </div>
      )}
    </div>
  );
}
