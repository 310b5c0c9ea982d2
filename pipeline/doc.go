// Package pipeline runs a corpus through read → tokenize/chunk → batch → dispatch → write, in bounded memory, losing no row.
package pipeline
