/// The tool's help text, printed by `datastack help` and `--help`, and on
/// standard error after a usage error.
enum Usage {
    static let text = """
        usage: datastack COMMAND FILE [OPTIONS]

        Reads, migrates and reindexes Core Data SQLite stores. inspect, dump and
        history open the store read-only and never change it.

        commands:
          inspect FILE [--json] [--model PATH]
              The store's metadata, its model (entities, their parent, attribute and
              relationship counts, where the model came from), the object count of
              each entity and, when the store records persistent history, a summary.
          dump FILE [--entity NAME] [--where PREDICATE] [--json] [--global-ids] [--model PATH]
              Every object (of NAME and its subentities, or of every entity), with its
              attribute values and the object IDs its relationships hold. --where
              takes an NSPredicate-style format: 'price > 10 AND name BEGINSWITH "A"'.
              --global-ids, for a replica (DataStackSync): objects named by their
              global IDs and in their order, so converged replicas dump the same text.
          history FILE [--after TRANSACTION] [--json] [--model PATH]
              The persistent history: each transaction (after the given transaction
              number) and its changes.
          migrate FILE --model PATH
              Migrates the store in place to the model at PATH (lightweight migration),
              with a progress bar on standard error. A store that already fits is
              left as it was; a damaged model cache (Z_MODELCACHE) is an error.
          reindex FILE [--model PATH]
              Builds the store's full-text search index anew, from its rows, for the
              String attributes the model marks for search (Xcode: Index in Spotlight);
              creates it for a store that has none, such as one Apple's Core Data wrote.
          sync-status FILE [--json]
              A replica's sync state (DataStackSync): its ID, the hub sequence it has
              applied, the local changes waiting to be pushed, its objects' global IDs.
          help
              This text.

        options:
          --json          JSON: inspect prints one object; dump and history print one
                          object per line (JSON Lines), so output streams.
          --model PATH    An .xcdatamodeld, .xcdatamodel, .mom or .momd to open the store with.
                          Without it, the model the store caches is used, or else one
                          inferred from the store's schema.

        exit status: 0 ok, 64 usage error, 65 bad input data (not a store, a model
        that does not load or fit), 66 file missing or unreadable, 70 internal error.
        """
}
