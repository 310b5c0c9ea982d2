package corpus

// ShardEstimate is Count for shard i of n: the Parquet rows of the row
// groups and the bytes of the JSON Lines blocks (whole .gz, CSV, TSV and Arrow files) the
// shard reads, for progress against what the shard's reader reports.
func ShardEstimate(files []string, i, n int) (Estimate, error) {
	parts, err := PlanShard(files, i, n)
	if err != nil {
		return Estimate{}, err
	}
	var est Estimate
	for _, p := range parts {
		switch {
		case p.Skip:
		case p.Kind == KindJSONL:
			est.JSONLBytes += p.End - p.Start
		case p.Kind == KindGzip || p.Kind == KindCSV || p.Kind == KindArrow:
			est.JSONLBytes += p.Size
		case p.Kind == KindParquet:
			_, _, groups, err := inputKind(p.File)
			if err != nil {
				return Estimate{}, err
			}
			end := p.RowGroup1
			if end < 0 || end > len(groups) {
				end = len(groups)
			}
			for g := max(p.RowGroup0, 0); g < end; g++ {
				est.ParquetRows += groups[g]
			}
		}
	}
	return est, nil
}
