import { ApiError, api, type FunctionDestination } from './api.js';
import { useLoad } from './ui.js';

/**
 * The names of the function destinations of some sources, by function id:
 * deliveries and attempts name a function only by its id. A deleted source
 * or function has no name any more; its id is then all there is to show.
 * `names` is undefined while they load.
 */
export function useFunctionNames(sourceIds: readonly string[]): { names: ReadonlyMap<string, string> | undefined; error: unknown } {
  const key = [...new Set(sourceIds)].sort().join(',');
  const { value, error } = useLoad(async () => {
    const lists = await Promise.all(
      (key === '' ? [] : key.split(',')).map((id) =>
        api<{ functions: FunctionDestination[] }>('GET', `/sources/${id}/destinations/functions`).then(
          (answer) => answer.functions,
          (failed: unknown) => {
            if (failed instanceof ApiError && failed.code === 'not_found') return [];
            throw failed;
          },
        ),
      ),
    );
    return new Map(lists.flat().map((fn) => [fn.id, fn.name]));
  }, [key]);
  return { names: value, error };
}
