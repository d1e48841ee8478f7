import { useState } from 'preact/hooks';
import { api, type Regulation } from '../api.js';
import type { Route } from '../route.js';
import { ErrorMessage, PageTitle, Status, formatTime, useLoad, useSources } from '../ui.js';

const TYPES = [
  { value: 'SUPPRESS_WITH_DELETE', label: 'Suppress and delete (stop collecting, erase stored messages)' },
  { value: 'DELETE_ONLY', label: 'Delete only (erase stored messages)' },
  { value: 'SUPPRESS_ONLY', label: 'Suppress only (stop collecting from now on)' },
  { value: 'UNSUPPRESS', label: 'Unsuppress (collect again)' },
] as const;

export function RegulationsPage(_props: { route: Route }) {
  const { sources } = useSources();
  const { value: regulations, error, reload } = useLoad(async () => (await api<{ regulations: Regulation[] }>('GET', '/regulations?limit=100')).regulations, []);
  const [type, setType] = useState<string>(TYPES[0].value);
  const [userIds, setUserIds] = useState('');
  const [everySource, setEverySource] = useState(true);
  const [chosen, setChosen] = useState<string[]>([]);
  const [createError, setCreateError] = useState<unknown>(undefined);
  const [notice, setNotice] = useState('');

  const create = async (event: Event): Promise<void> => {
    event.preventDefault();
    const subjectIds = [...new Set(userIds.split(/[\s,]+/).filter((id) => id !== ''))];
    try {
      const created = await api<{ id: string; status: string }>('POST', '/regulations', {
        regulationType: type,
        subjectType: 'USER_ID',
        subjectIds,
        ...(!everySource && { sourceIds: chosen }),
      });
      setCreateError(undefined);
      setUserIds('');
      setNotice(`Created request ${created.id} (${created.status}).`);
      reload();
    } catch (failed) {
      setCreateError(failed);
    }
  };
  const sourceName = (id: string): string => sources?.find((s) => s.id === id)?.name ?? id;

  return (
    <section aria-labelledby="page-title">
      <PageTitle>Regulations</PageTitle>
      <form onSubmit={(event) => void create(event)} aria-label="New deletion or suppression request" noValidate>
        <label>
          Type
          <select value={type} onChange={(event) => setType((event.target as HTMLSelectElement).value)}>
            {TYPES.map((t) => (
              <option key={t.value} value={t.value}>
                {t.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          User ids (one per line, or separated by commas)
          <textarea rows={3} value={userIds} onInput={(event) => setUserIds((event.target as HTMLTextAreaElement).value)} />
        </label>
        <fieldset>
          <legend>Sources</legend>
          <label class="checkbox">
            <input type="checkbox" checked={everySource} onChange={(event) => setEverySource((event.target as HTMLInputElement).checked)} />
            Every source, including sources created later
          </label>
          {!everySource &&
            sources?.map((source) => (
              <label class="checkbox" key={source.id}>
                <input
                  type="checkbox"
                  checked={chosen.includes(source.id)}
                  onChange={(event) =>
                    setChosen((all) => ((event.target as HTMLInputElement).checked ? [...all, source.id] : all.filter((id) => id !== source.id)))
                  }
                />
                {source.name} ({source.id})
              </label>
            ))}
        </fieldset>
        <ErrorMessage error={createError} />
        <button type="submit">Create request</button>
        <Status>{notice}</Status>
      </form>
      <h2>Requests</h2>
      <button type="button" class="secondary" onClick={reload}>
        Refresh
      </button>
      <ErrorMessage error={error} />
      {regulations !== undefined && regulations.length === 0 && <p>No requests yet. Create one with the form above: it deletes users' messages (and stops collecting them) or only stops collecting them.</p>}
      {regulations !== undefined && regulations.length > 0 && (
        <table tabIndex={0}>
          <caption class="visually-hidden">Deletion and suppression requests, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Created</th>
              <th scope="col">Id</th>
              <th scope="col">Type</th>
              <th scope="col">Users</th>
              <th scope="col">Status</th>
              <th scope="col">Per source</th>
            </tr>
          </thead>
          <tbody>
            {regulations.map((regulation) => (
              <tr key={regulation.id}>
                <td>{formatTime(regulation.createdAt)}</td>
                <td>
                  <code>{regulation.id}</code>
                </td>
                <td>{regulation.regulationType}</td>
                <td>{regulation.subjectCount}</td>
                <td>{regulation.status}</td>
                <td>
                  {regulation.sourceIds === null && <div>Every source</div>}
                  <ul class="plain">
                    {regulation.sources.map((step) => (
                      <li key={step.sourceId}>
                        {sourceName(step.sourceId)}: {step.status}
                        {step.error !== undefined && ` (${step.error})`}
                      </li>
                    ))}
                  </ul>
                  {regulation.sourceCounts.total > regulation.sources.length && (
                    <div>
                      and {regulation.sourceCounts.total - regulation.sources.length} more ({regulation.sourceCounts.finished} finished,{' '}
                      {regulation.sourceCounts.pending} pending, {regulation.sourceCounts.failed} failed in all)
                    </div>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
