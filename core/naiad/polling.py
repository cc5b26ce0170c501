"""``--model-control-mode=poll``: find what changed in the repositories and (re)load or unload it.

Each poll fingerprints every model folder (:func:`naiad.repository.fingerprint`). A folder that is
new or changed loads only once two polls in a row see the same files, so a folder still being
copied is never loaded half-written; it is picked up on a later poll. A model whose folder is gone
is unloaded (finishing its requests) and leaves the index. A failed reload keeps the versions that
were serving, and the model is tried again when its files change.
"""

from __future__ import annotations

import asyncio
import logging

from naiad.lifecycle import ModelLifecycle
from naiad.repository import Fingerprint, fingerprint

logger = logging.getLogger(__name__)


class RepositoryPoller:
    """Brings the loaded models in line with the repositories, one poll at a time."""

    def __init__(self, lifecycle: ModelLifecycle) -> None:
        self._lifecycle = lifecycle
        self._loaded: dict[str, Fingerprint] = {}  # what each model's last load attempt saw
        self._seen: dict[str, Fingerprint] = {}  # changed folders, as the last poll saw them
        self._stopping = asyncio.Event()

    def start(self) -> None:
        """The startup load: every model of the repositories, at once."""
        sources = self._lifecycle.discover()
        self._loaded = {name: fingerprint(source.path) for name, source in sources.items()}
        self._lifecycle.load_models(sources)

    def poll(self) -> None:
        """One poll: unload removed models, (re)load added and changed ones whose files settled."""
        try:
            sources = self._lifecycle.discover()
        except OSError as error:
            logger.error("cannot poll the model repositories: %s; nothing changes until they are back", error)
            return
        for name in sorted(set(self._loaded) - set(sources)):
            logger.info("model '%s' left the model repository; unloading it", name, extra={"model": name})
            self._lifecycle.remove_model(name)
            del self._loaded[name]
        ready: dict[str, Fingerprint] = {}
        for name, source in sources.items():
            current = fingerprint(source.path)
            if self._loaded.get(name) == current:
                self._seen.pop(name, None)
            elif self._seen.get(name) == current:  # unchanged since the last poll: the copy is complete
                ready[name] = current
            else:
                self._seen[name] = current
        if not ready:
            return
        reuse = {name: self._unchanged_versions(name, current) for name, current in ready.items()}
        logger.info("model repository changed; loading %s", ", ".join(f"'{name}'" for name in sorted(ready)))
        self._lifecycle.load_models({name: sources[name] for name in ready}, reuse)
        for name, current in ready.items():
            self._loaded[name] = current
            del self._seen[name]

    def _unchanged_versions(self, name: str, current: Fingerprint) -> set[int]:
        """Versions whose folders did not change, when the rest of the model (its config) did not either."""
        before = self._loaded.get(name)
        if before is None or before.shared != current.shared:
            return set()
        return {version for version, files in current.versions.items() if before.versions.get(version) == files}

    async def run(self, interval: float) -> None:
        """Poll every ``interval`` seconds (each poll in a worker thread) until :meth:`stop`.

        A poll under way when asked to stop finishes first, so nothing loads after the server unloads.
        """
        while not await self._stopped_within(interval):
            try:
                await asyncio.to_thread(self.poll)
            except Exception:
                logger.exception("polling the model repositories failed; trying again in %s s", interval)

    def stop(self) -> None:
        """End :meth:`run` after the poll under way, if any (call on the loop that runs it)."""
        self._stopping.set()

    async def _stopped_within(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            return False
        return True
