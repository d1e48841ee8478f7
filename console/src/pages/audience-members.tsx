import { api, type AudienceMember } from '../api.js';
import { ErrorMessage, formatTime, PageButtons, useCursorPages, useLoad } from '../ui.js';

const PAGE_SIZE = 50;

/** An audience's current members, a page at a time with the API's cursor. */
export function AudienceMembers({ id, name, onClose }: { id: string; name: string; onClose: () => void }) {
  const pages = useCursorPages();
  const { cursor, page } = pages;
  const query = new URLSearchParams({ limit: String(PAGE_SIZE), ...(cursor !== undefined && { cursor }) });
  const { value, error, reload } = useLoad(
    async () => ({ page, ...(await api<{ members: AudienceMember[]; cursor?: string }>('GET', `/audiences/${encodeURIComponent(id)}/members?${query.toString()}`)) }),
    [id, cursor, page],
  );
  // Numbered from the page loaded, not the one asked for, while the next one loads.
  const first = ((value?.page ?? page) - 1) * PAGE_SIZE + 1;
  return (
    <section class="panel" aria-labelledby="members-title">
      <h2 id="members-title">Members of {name}</h2>
      <ErrorMessage error={error} />
      {value !== undefined && value.members.length === 0 && <p>{value.page === 1 ? 'No members right now. A profile joins once its messages meet the definition.' : 'No more members.'}</p>}
      {value !== undefined && value.members.length > 0 && (
        <>
          <p class="hint">
            Members {first} to {first + value.members.length - 1}, in the order they joined.
          </p>
          <table>
            <caption class="visually-hidden">Members of {name}</caption>
            <thead>
              <tr>
                <th scope="col">User id</th>
                <th scope="col">Anonymous id</th>
                <th scope="col">Profile</th>
                <th scope="col">Member since</th>
              </tr>
            </thead>
            <tbody>
              {value.members.map((member) => (
                <tr key={member.profileId} class="member">
                  <td>{member.userId === undefined ? <span class="hint">anonymous</span> : <a href={profileLink(`user_id:${member.userId}`)}>{member.userId}</a>}</td>
                  <td>{member.anonymousId === undefined ? '' : <a href={profileLink(`anonymous_id:${member.anonymousId}`)}>{member.anonymousId}</a>}</td>
                  <td>
                    <code>{member.profileId}</code>
                  </td>
                  <td>{formatTime(member.since)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      <nav class="row" aria-label="Pages of members">
        <PageButtons pages={pages} next={value?.cursor} noun="members" />
        <button type="button" class="secondary" onClick={reload}>
          Refresh members
        </button>
        <button type="button" class="secondary" onClick={onClose}>
          Close members
        </button>
      </nav>
    </section>
  );
}

export function profileLink(identifier: string): string {
  return `#/profiles?${new URLSearchParams({ id: identifier }).toString()}`;
}
