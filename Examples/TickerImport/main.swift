import DataStack

// Placeholder until the ticker-import issue: proves the executable builds and links.
print("ticker-import: the live example is not built yet (see issue 'ticker-import').")
