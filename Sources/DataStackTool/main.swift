import DataStack

print("usage: datastack inspect|dump|history|migrate FILE")
