end}
